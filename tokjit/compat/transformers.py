"""The ``transformers`` tokenizer surface on :class:`~tokjit.Tokenizer`.

``tok(texts, pairs, padding=..., truncation=..., return_tensors=...)`` returns a :class:`BatchEncoding`
with the ids, masks and offsets ``transformers.AutoTokenizer`` (the fast tokenizer) returns for the same
folder, plus the vocabulary helpers (``get_vocab``, ``convert_*``, ``tokenize``, ``batch_decode``) and
the special-token attributes. Texts are encoded by the public batch API; special-token templates,
truncation and padding then run on flat arrays (one numpy gather per template part, no per-token
Python). torch is imported only for ``return_tensors="pt"``.
"""

from __future__ import annotations

import unicodedata
from typing import Any

import numpy as np

from tokjit.errors import InputError, TokjitError, UnsupportedComponentError
from tokjit.spec import TokenType
from tokjit.load.pretrained import NAMED_SPECIAL_TOKENS, VERY_LARGE_INTEGER

# transformers treats a model_max_length above this as "no limit" for default truncation/padding
LARGE_INTEGER = int(1e20)
_TRUNCATIONS = ("longest_first", "only_first", "only_second", "do_not_truncate")
_PADDINGS = ("longest", "max_length", "do_not_pad")


class MissingDependencyError(TokjitError, ImportError):
    """An optional package a requested feature needs is not installed."""


class BatchEncoding(dict):
    """A dict of model inputs (``input_ids``, ``attention_mask``, ...) also readable as attributes."""

    def __getattr__(self, name: str):
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None

    @property
    def data(self) -> dict:
        return dict(self)


def _ragged_arange(lengths: np.ndarray) -> np.ndarray:
    """``concatenate([arange(n) for n in lengths])`` without the loop."""
    lengths = lengths.astype(np.int64, copy=False)
    total = int(lengths.sum())
    if total == 0:
        return np.zeros(0, np.int64)
    starts = np.cumsum(lengths) - lengths
    return np.arange(total, dtype=np.int64) - np.repeat(starts, lengths)


class _Rows:
    """A batch of encoded texts: flat ids (and character spans) with row offsets."""

    __slots__ = ("ids", "offsets", "starts", "ends")

    def __init__(self, ids, offsets, starts=None, ends=None):
        self.ids, self.offsets, self.starts, self.ends = ids, offsets, starts, ends

    @property
    def lengths(self) -> np.ndarray:
        return np.diff(self.offsets)


def _template_from_post_processor(pp: dict | None, pair: bool) -> list | None:
    """The parts ``("A"|"B", type_id)`` / ``("S", ids, type_id)`` a tokenizer.json post-processor puts
    around one sequence or a pair; ``None`` if it adds nothing."""
    if not pp:
        return None
    kind = pp.get("type")
    if kind == "Sequence":
        found = None
        for sub in pp.get("processors", []):
            t = _template_from_post_processor(sub, pair)
            if t is not None:
                found = t
        return found
    if kind == "TemplateProcessing":
        specials = pp.get("special_tokens", {})
        if pair and not pp.get("pair"):
            # loaders of formats without a pair template (SentencePiece, GGUF) give only "single":
            # a pair repeats it around B with type id 1, as transformers 5 builds pair templates
            single = _template_from_post_processor(pp, False)
            return single + [("B", 1) if p[0] == "A" else ("S", p[1], 1) for p in single]
        parts = []
        for item in pp.get("pair" if pair else "single", []):
            if "Sequence" in item:
                parts.append((item["Sequence"]["id"], int(item["Sequence"].get("type_id", 0))))
            else:
                name = item["SpecialToken"]["id"]
                parts.append(("S", np.asarray(specials[name]["ids"], np.int32),
                              int(item["SpecialToken"].get("type_id", 0))))
        return parts
    if kind in ("BertProcessing", "RobertaProcessing"):
        cls = np.asarray([int(pp["cls"][1])], np.int32)
        sep = np.asarray([int(pp["sep"][1])], np.int32)
        if not pair:
            return [("S", cls, 0), ("A", 0), ("S", sep, 0)]
        if kind == "BertProcessing":
            return [("S", cls, 0), ("A", 0), ("S", sep, 0), ("B", 1), ("S", sep, 1)]
        return [("S", cls, 0), ("A", 0), ("S", sep, 0), ("S", sep, 0), ("B", 0), ("S", sep, 0)]
    return None


class TransformersMixin:
    """The methods and attributes of a ``transformers`` fast tokenizer (see the module docstring).

    Needs from its host: ``spec``, ``encode_batch_numpy``, ``encode_with_offsets``, ``decode``,
    ``id_to_token``, ``token_to_id`` and, for folders, ``hf_config`` (set by the loader)."""

    hf_config = None

    # ---------------------------------------------------------------------------------------------
    # special tokens and limits
    # ---------------------------------------------------------------------------------------------

    def _special_token(self, name: str) -> str | None:
        cfg = self.hf_config
        if cfg is not None:
            return cfg.special_tokens.get(name)
        tid = {"bos_token": self.spec.bos_id, "eos_token": self.spec.eos_id,
               "unk_token": self.spec.unk_id, "pad_token": self.spec.pad_id}.get(name)
        return None if tid is None else self._token_string(tid)

    def _token_string(self, tid: int) -> str:
        for t in self.spec.added_tokens:
            if t.id == tid:
                return t.content
        return self.id_to_token(tid)

    def _special_id(self, name: str) -> int | None:
        token = self._special_token(name)
        return None if token is None else self.convert_tokens_to_ids(token)

    bos_token = property(lambda self: self._special_token("bos_token"))
    eos_token = property(lambda self: self._special_token("eos_token"))
    unk_token = property(lambda self: self._special_token("unk_token"))
    sep_token = property(lambda self: self._special_token("sep_token"))
    pad_token = property(lambda self: self._special_token("pad_token"))
    cls_token = property(lambda self: self._special_token("cls_token"))
    mask_token = property(lambda self: self._special_token("mask_token"))
    sep_token_id = property(lambda self: self._special_id("sep_token"))
    cls_token_id = property(lambda self: self._special_id("cls_token"))
    mask_token_id = property(lambda self: self._special_id("mask_token"))

    @property
    def pad_token_id(self) -> int | None:
        return self._special_id("pad_token") if self.hf_config is not None else self.spec.pad_id

    @property
    def unk_token_id(self) -> int | None:
        return self._special_id("unk_token") if self.hf_config is not None else self.spec.unk_id

    @property
    def special_tokens_map(self) -> dict[str, str]:
        cfg = self.hf_config
        names = list(cfg.special_tokens) if cfg is not None else list(NAMED_SPECIAL_TOKENS)
        out = {n: self._special_token(n) for n in names}
        return {n: v for n, v in out.items() if v is not None}

    @property
    def all_special_tokens(self) -> list[str]:
        out = list(dict.fromkeys(self.special_tokens_map.values()))
        if self.hf_config is not None:
            for t in self.hf_config.extra_special_tokens:
                if t not in out:
                    out.append(t)
        return out

    @property
    def all_special_ids(self) -> list[int]:
        return self.convert_tokens_to_ids(self.all_special_tokens)

    @property
    def model_max_length(self) -> int:
        return self.hf_config.model_max_length if self.hf_config is not None else VERY_LARGE_INTEGER

    @property
    def padding_side(self) -> str:
        side = self.__dict__.get("_padding_side")
        if side is None:
            side = self.hf_config.padding_side if self.hf_config is not None else "right"
        return side

    @padding_side.setter
    def padding_side(self, side: str) -> None:
        self._padding_side = _side(side, "padding_side")

    @property
    def truncation_side(self) -> str:
        side = self.__dict__.get("_truncation_side")
        if side is None:
            side = self.hf_config.truncation_side if self.hf_config is not None else "right"
        return side

    @truncation_side.setter
    def truncation_side(self, side: str) -> None:
        self._truncation_side = _side(side, "truncation_side")

    @property
    def model_input_names(self) -> list[str]:
        return list(self.hf_config.model_input_names) if self.hf_config is not None else \
            ["input_ids", "attention_mask"]

    # ---------------------------------------------------------------------------------------------
    # vocabulary
    # ---------------------------------------------------------------------------------------------

    def get_vocab(self) -> dict[str, int]:
        """Token string -> id, added tokens included (transformers' ``get_vocab``)."""
        vocab = getattr(self, "_hf_vocab", None)
        if vocab is None:
            vocab = {}
            types, tokens = self.spec.token_types, self.spec.tokens
            for i in range(len(tokens)):
                # ids the file leaves unassigned (tiktoken rank gaps) are not in a HF vocabulary
                if i < len(types) and types[i] == TokenType.UNUSED and not tokens[i]:
                    continue
                vocab.setdefault(self.id_to_token(i), i)
            for t in self.spec.added_tokens:
                vocab[t.content] = t.id
            self._hf_vocab = vocab
        return dict(vocab)

    def __bool__(self) -> bool:  # __len__ below would otherwise make truth tests build the vocabulary
        return True

    def __len__(self) -> int:
        """Ids in use, added tokens included (ids a file leaves unassigned are not counted)."""
        tokens, types = self.spec.tokens, self.spec.token_types
        holes = 0
        if len(types):
            unused = np.flatnonzero(types == TokenType.UNUSED)
            added = {t.id for t in self.spec.added_tokens}
            holes = sum(1 for i in unused.tolist() if not tokens[i] and i not in added)
        return len(tokens) - holes

    def convert_ids_to_tokens(self, ids, skip_special_tokens: bool = False):
        if isinstance(ids, (int, np.integer)):
            return self._token_string(int(ids))
        skip = set(self.all_special_ids) if skip_special_tokens else ()
        return [self._token_string(int(i)) for i in ids if int(i) not in skip]

    def convert_tokens_to_ids(self, tokens):
        """Ids of token strings; a string not in the vocabulary gives ``unk_token_id`` (or None)."""
        if isinstance(tokens, str):
            tid = self.token_to_id(tokens)
            return self.unk_token_id if tid is None and tokens != self.unk_token else tid
        return [self.convert_tokens_to_ids(t) for t in tokens]

    def tokenize(self, text: str, pair: str | None = None, add_special_tokens: bool = False) -> list[str]:
        """Token strings of ``text`` (as the vocabulary spells them)."""
        unigram_unk = self.spec.model.get("type") == "Unigram" and self.spec.unk_id is not None
        enc = self(text, pair, add_special_tokens=add_special_tokens, return_attention_mask=False,
                   return_token_type_ids=False, return_offsets_mapping=unigram_unk,
                   return_special_tokens_mask=unigram_unk)
        tokens = self.convert_ids_to_tokens(enc["input_ids"])
        if unigram_unk:
            # HF's Unigram names an unknown piece by its text, not by the unk token
            n_first = len(self.encode(text, parse_special=True))
            seen = 0
            for i, (tid, special, (s, e)) in enumerate(zip(enc["input_ids"], enc["special_tokens_mask"],
                                                           enc["offset_mapping"])):
                if special:
                    continue
                if tid == self.spec.unk_id and e > s:
                    tokens[i] = self._unknown_piece(text if seen < n_first else pair, enc["offset_mapping"],
                                                    tokens, i)
                seen += 1
        return tokens

    def _unknown_piece(self, text: str, spans, tokens: list[str], i: int) -> str:
        """The normalized text an unknown Unigram token stands for (HF's token string for it).

        Its source span, widened over combining marks no token claims, is normalized; what the
        tokens sharing that source spell before and after it ("½" -> "▁1", "⁄", "2") is cut off."""
        s, e = spans[i]
        starts = {a for a, _ in spans}
        while e < len(text) and e not in starts and unicodedata.category(text[e]) in ("Mn", "Mc", "Me"):
            e += 1
        piece = self._normalize_text(text[s:e]) if self.normalizer is not None else text[s:e]
        piece = piece.replace(" ", "\u2581")
        before = "".join(tokens[j] for j in range(i) if spans[j][1] > s and spans[j][0] < e)
        after = "".join(tokens[j] for j in range(i + 1, len(tokens)) if spans[j][0] < e and spans[j][1] > s)
        for cut in range(len(piece) - 1, 0, -1):  # longest head of the piece the tokens before end with
            if before.endswith(piece[:cut]):
                piece = piece[cut:]
                break
        for cut in range(1, len(piece)):  # longest tail the tokens after start with
            if after.startswith(piece[cut:]):
                piece = piece[:cut]
                break
        return piece or text[s:e]

    def convert_tokens_to_string(self, tokens: list[str]) -> str:
        return self.decode(self.convert_tokens_to_ids(tokens))

    def batch_decode(self, sequences, skip_special_tokens: bool = False,
                     clean_up_tokenization_spaces: bool | None = None) -> list[str]:
        if isinstance(sequences, dict):
            sequences = sequences["input_ids"]
        if hasattr(sequences, "tolist"):
            sequences = sequences.tolist()
        return [self._hf_decode(ids, skip_special_tokens, clean_up_tokenization_spaces) for ids in sequences]

    def _hf_decode(self, ids, skip_special_tokens, clean_up) -> str:
        if hasattr(ids, "tolist"):
            ids = ids.tolist()
        if isinstance(ids, int):
            ids = [ids]
        text = self.decode(ids, skip_special_tokens=skip_special_tokens)
        if clean_up is None:
            clean_up = self.hf_config is not None and self.hf_config.clean_up_tokenization_spaces
        # transformers skips the clean-up for BPE models (it would delete real spaces there)
        if clean_up and self.spec.model.get("type") != "BPE":
            for a, b in ((" .", "."), (" ?", "?"), (" !", "!"), (" ,", ","), (" ' ", "'"), (" n't", "n't"),
                         (" 'm", "'m"), (" 's", "'s"), (" 've", "'ve"), (" 're", "'re")):
                text = text.replace(a, b)
        return text

    def _trim_offsets_rule(self):
        """``add_prefix_space`` of the post-processor that trims offsets (ByteLevel or Roberta with
        ``trim_offsets``), or None when none does."""
        rule = self.__dict__.get("_hf_trim_rule", False)
        if rule is False:
            rule = None
            stack = [self.spec.post_processor]
            while stack:
                pp = stack.pop()
                if not isinstance(pp, dict):
                    continue
                if pp.get("type") == "Sequence":
                    stack.extend(pp.get("processors", []))
                elif pp.get("type") in ("ByteLevel", "RobertaProcessing") and pp.get("trim_offsets", True):
                    rule = bool(pp.get("add_prefix_space", True))
            self._hf_trim_rule = rule
        return rule

    def _trim_offsets(self, ids, starts: np.ndarray, ends: np.ndarray):
        """HF's ``trim_offsets``: a token's span leaves out the spaces its string starts or ends with
        (``Ġ`` in byte-level vocabularies), except the one ``add_prefix_space`` put before the text."""
        add_prefix_space = self._trim_offsets_rule()
        if add_prefix_space is None or len(ids) == 0:
            return starts, ends
        ids = np.asarray(ids, np.int64)
        uniq, where = np.unique(ids, return_inverse=True)
        counts = np.array([_space_runs(self._token_string(int(t))) for t in uniq.tolist()], np.int64)
        lead, trail = counts[where, 0], counts[where, 1]
        first = (np.arange(ids.shape[0]) == 0) | (starts == 0)
        if add_prefix_space:
            lead = np.where(first & (lead == 1), 0, lead)
        starts = np.where(lead > 0, np.minimum(starts + lead, ends), starts)
        ends = np.where((trail > 0) & (ends >= trail), np.maximum(ends - trail, starts), ends)
        return starts, ends

    def _post_process_with_offsets(self, ids: list[int], offsets: list) -> tuple[list[int], list]:
        """``post_process`` with (0, 0) offsets for the tokens it adds."""
        # post-processors only wrap the ids (prefix + ids + suffix): one marker locates the text
        wrapped = self.post_process([-1])
        at = wrapped.index(-1)
        prefix, suffix = wrapped[:at], wrapped[at + 1:]
        return (prefix + list(ids) + suffix,
                [(0, 0)] * len(prefix) + list(offsets) + [(0, 0)] * len(suffix))

    # ---------------------------------------------------------------------------------------------
    # __call__
    # ---------------------------------------------------------------------------------------------

    def _hf_template(self, pair: bool) -> list:
        cache = self.__dict__.setdefault("_hf_templates", {})
        if pair in cache:
            return cache[pair]
        cfg = self.hf_config
        if (cfg is not None and cfg.rebuilds_template) or self.spec.post_processor is None:
            # transformers 5 rebuilds the template from add_bos_token / add_eos_token when the config
            # names either, and when the file has no post-processor
            bos_on = bool(cfg is not None and cfg.add_bos_token) and self.bos_token_id is not None
            eos_on = bool(cfg is not None and cfg.add_eos_token) and self.eos_token_id is not None
            bos = [("S", np.asarray([self.bos_token_id], np.int32), 0)] if bos_on else []
            eos = [("S", np.asarray([self.eos_token_id], np.int32), 0)] if eos_on else []
            parts = bos + [("A", 0)] + eos
            if pair:
                parts += [("S", p[1], 1) for p in bos] + [("B", 1)] + [("S", p[1], 1) for p in eos]
        else:
            parts = _template_from_post_processor(self.spec.post_processor, pair)
            if parts is None:
                parts = [("A", 0)] + ([("B", 1)] if pair else [])
        cache[pair] = parts
        return parts

    def _encode_rows(self, texts: list[str], with_offsets: bool) -> _Rows:
        if not with_offsets:
            ids, offsets = self.encode_batch_numpy(texts, parse_special=True)
            return _Rows(np.asarray(ids, np.int32), np.asarray(offsets, np.int64))
        id_parts, span_parts = [], []
        for text in texts:
            ids, spans = self.encode_with_offsets(text, parse_special=True)
            id_parts.append(np.asarray(ids, np.int32))
            span_parts.append(np.asarray(spans, np.int64).reshape(-1, 2))
        offsets = np.zeros(len(texts) + 1, np.int64)
        np.cumsum([p.shape[0] for p in id_parts], out=offsets[1:])
        ids = np.concatenate(id_parts) if id_parts else np.zeros(0, np.int32)
        spans = np.concatenate(span_parts) if span_parts else np.zeros((0, 2), np.int64)
        return _Rows(ids, offsets, spans[:, 0].copy(), spans[:, 1].copy())

    def __call__(self, text=None, text_pair=None, *, add_special_tokens: bool = True, padding=False,
                 truncation=None, max_length: int | None = None, stride: int = 0,
                 pad_to_multiple_of: int | None = None, padding_side: str | None = None,
                 return_tensors: str | None = None, return_attention_mask: bool | None = None,
                 return_token_type_ids: bool | None = None, return_special_tokens_mask: bool = False,
                 return_offsets_mapping: bool = False, return_length: bool = False,
                 return_overflowing_tokens: bool = False) -> BatchEncoding:
        """Encode a text, a pair, or batches of them, as ``transformers`` tokenizers do.

        ``return_overflowing_tokens=True`` (single texts) adds a row per window the truncation cut
        off, ``stride`` tokens overlapping the window before, and ``overflow_to_sample_mapping``."""
        if return_tensors not in (None, "np", "pt"):
            raise InputError(f"return_tensors must be None, 'np' or 'pt', not {return_tensors!r}")
        batched, texts, pairs = _batch_inputs(text, text_pair)
        pad_strategy, trunc_strategy, max_length = self._strategies(padding, truncation, max_length,
                                                                    pad_to_multiple_of)
        a = self._encode_rows(texts, return_offsets_mapping)
        b = self._encode_rows(pairs, return_offsets_mapping) if pairs is not None else None
        template = self._hf_template(b is not None) if add_special_tokens else \
            [("A", 0)] + ([("B", 1)] if b is not None else [])
        n_added = sum(p[1].shape[0] for p in template if p[0] == "S")

        if trunc_strategy != "do_not_truncate" and stride:
            single_added = sum(p[1].shape[0] for p in self._hf_template(False) if p[0] == "S") \
                if add_special_tokens else 0
            # HF tokenizers refuses a stride that leaves a single text no room, whatever the inputs
            if max_length >= single_added and stride > max_length - single_added:
                raise InputError(f"stride ({stride}) must not exceed max_length ({max_length}) less the "
                                 f"{single_added} special tokens a text gets")
        keep_a, keep_b = a.lengths, (b.lengths if b is not None else None)
        # HF tokenizers leaves the sequences whole when the special tokens alone exceed max_length
        if trunc_strategy != "do_not_truncate" and max_length >= n_added:
            keep_a, keep_b = _truncated_lengths(keep_a, keep_b, max_length - n_added, trunc_strategy, stride)
        left_trunc = self.truncation_side == "left"
        sample_of_row = None
        if return_overflowing_tokens:
            if b is not None:
                raise UnsupportedComponentError("return_overflowing_tokens with text_pair is not supported")
            sample_of_row = np.arange(len(texts), dtype=np.int64)
            if trunc_strategy != "do_not_truncate" and max_length >= n_added:
                a, sample_of_row = _overflow_windows(a, max_length - n_added, stride, left_trunc)
                keep_a, left_trunc = a.lengths, False
            batched = True  # transformers keeps the batch axis when it returns overflow rows

        # lay every row out: template parts in order, sequences cut to their kept lengths
        n = a.lengths.shape[0]
        part_lengths = []
        for part in template:
            if part[0] == "S":
                part_lengths.append(np.full(n, part[1].shape[0], np.int64))
            else:
                part_lengths.append(keep_a if part[0] == "A" else keep_b)
        row_len = np.sum(part_lengths, axis=0) if part_lengths else np.zeros(n, np.int64)
        row_len = np.asarray(row_len, np.int64).reshape(n)

        target = None
        if pad_strategy == "longest":
            target = int(row_len.max()) if n else 0
        elif pad_strategy == "max_length":
            target = int(max_length)
        if target is not None and pad_to_multiple_of:
            target = -(-target // pad_to_multiple_of) * pad_to_multiple_of
        out_len = row_len if target is None else np.maximum(row_len, target)
        out_off = np.zeros(n + 1, np.int64)
        np.cumsum(out_len, out=out_off[1:])
        side = _side(padding_side or self.padding_side, "padding_side")
        content_start = out_off[:-1] + ((out_len - row_len) if side == "left" else 0)

        total = int(out_off[-1])
        pad_id = self.pad_token_id if target is not None else 0
        input_ids = np.full(total, pad_id if pad_id is not None else 0, np.int64)
        type_ids = np.zeros(total, np.int64)
        special = np.ones(total, np.int64)
        mask = np.zeros(total, np.int64)
        want_offsets = return_offsets_mapping
        if want_offsets:
            span_s = np.zeros(total, np.int64)
            span_e = np.zeros(total, np.int64)
        pos = content_start.copy()
        for part, length in zip(template, part_lengths):
            idx = _ragged_arange(length)
            dst = np.repeat(pos, length) + idx
            mask[dst] = 1
            if part[0] == "S":
                input_ids[dst] = np.tile(part[1], n)
                type_ids[dst] = part[2]
            else:
                rows = a if part[0] == "A" else b
                skip = (rows.lengths - length) if left_trunc else 0
                src = np.repeat(rows.offsets[:-1] + skip, length) + idx
                input_ids[dst] = rows.ids[src]
                type_ids[dst] = part[1]
                special[dst] = 0
                if want_offsets:
                    span_s[dst] = rows.starts[src]
                    span_e[dst] = rows.ends[src]
            pos += length
        if target is not None:
            special[mask == 0] = 1

        if return_token_type_ids is None:
            return_token_type_ids = "token_type_ids" in self.model_input_names
        if return_attention_mask is None:
            return_attention_mask = "attention_mask" in self.model_input_names
        columns = [("input_ids", input_ids)]
        if return_token_type_ids:
            columns.append(("token_type_ids", type_ids))
        if return_attention_mask:
            columns.append(("attention_mask", mask))
        if return_special_tokens_mask:
            columns.append(("special_tokens_mask", special))
        if want_offsets:
            columns.append(("offset_mapping", np.stack([span_s, span_e], axis=1)))
        out = BatchEncoding()
        for key, flat in columns:
            out[key] = _shape(flat, out_off, out_len, batched, return_tensors, key)
        if return_length:
            out["length"] = _shape_lengths(out_len, batched, return_tensors)
        if sample_of_row is not None:
            out["overflow_to_sample_mapping"] = sample_of_row.tolist() if return_tensors is None else \
                _tensor(sample_of_row, return_tensors)
        return out

    def _strategies(self, padding, truncation, max_length, pad_to_multiple_of):
        """transformers' ``_get_padding_truncation_strategies``."""
        if max_length is not None and padding is False and truncation is None:
            truncation = "longest_first"
        if padding is True:
            pad = "longest"
        elif padding is False or padding is None:
            pad = "do_not_pad"
        elif padding in _PADDINGS:
            pad = padding
        else:
            raise InputError(f"padding must be True, False or one of {_PADDINGS}, not {padding!r}")
        if truncation is True:
            trunc = "longest_first"
        elif truncation is False or truncation is None:
            trunc = "do_not_truncate"
        elif truncation in _TRUNCATIONS:
            trunc = truncation
        else:
            raise InputError(f"truncation must be True, False or one of {_TRUNCATIONS}, not {truncation!r}")
        if max_length is not None and (isinstance(max_length, bool) or int(max_length) != max_length
                                       or max_length < 0):
            raise InputError(f"max_length must be a non-negative int, not {max_length!r}")
        if pad_to_multiple_of is not None and (isinstance(pad_to_multiple_of, bool) or pad_to_multiple_of < 1):
            raise InputError(f"pad_to_multiple_of must be a positive int, not {pad_to_multiple_of!r}")
        if max_length is None:
            if pad == "max_length":
                if self.model_max_length > LARGE_INTEGER:
                    pad = "do_not_pad"
                else:
                    max_length = self.model_max_length
            if trunc != "do_not_truncate":
                if self.model_max_length > LARGE_INTEGER:
                    trunc = "do_not_truncate"
                else:
                    max_length = self.model_max_length
        if pad != "do_not_pad" and self.pad_token_id is None:
            raise InputError("asked to pad but the tokenizer has no pad token (tokenizer_config.json names "
                             "none); pad to another token by passing the ids yourself")
        if trunc != "do_not_truncate" and pad != "do_not_pad" and pad_to_multiple_of is not None and \
                max_length is not None and max_length % pad_to_multiple_of:
            raise InputError(f"truncation length ({max_length}) is not a multiple of pad_to_multiple_of "
                             f"({pad_to_multiple_of})")
        return pad, trunc, max_length


def _space_runs(token: str) -> tuple[int, int]:
    """Leading and trailing space characters of a token string (``Ġ`` is GPT-2's mapped space)."""
    def is_space(c):
        return c == "\u0120" or c.isspace()
    lead = 0
    while lead < len(token) and is_space(token[lead]):
        lead += 1
    trail = 0
    while trail < len(token) and is_space(token[len(token) - 1 - trail]):  # may overlap lead, as in HF
        trail += 1
    return lead, trail


def _side(side, what: str) -> str:
    if side not in ("left", "right"):
        raise InputError(f"{what} must be 'left' or 'right', not {side!r}")
    return side


def _batch_inputs(text, text_pair):
    """(batched, texts, pairs or None) after checking the inputs' shapes."""
    def as_list(x, what):
        if isinstance(x, str):
            return False, [x]
        if isinstance(x, (list, tuple)) and all(isinstance(t, str) for t in x):
            return True, list(x)
        raise InputError(f"{what} must be a str or a list of str (pre-tokenized input is not supported), "
                         f"got {type(x).__name__}")
    if text is None:
        raise InputError("no text given")
    batched, texts = as_list(text, "text")
    if text_pair is None:
        return batched, texts, None
    pair_batched, pairs = as_list(text_pair, "text_pair")
    if pair_batched != batched or len(pairs) != len(texts):
        raise InputError(f"text_pair must match text: {len(texts)} text(s) and {len(pairs)} pair(s)")
    return batched, texts, pairs


def _truncated_lengths(na, nb, limit: int, strategy: str, stride: int):
    """Kept lengths per row, as HF ``tokenizers``' ``truncate_encodings`` computes them."""
    if nb is None:
        if strategy == "only_second" and np.any(na > limit):
            raise InputError("truncation='only_second' needs text_pair")
        kept = np.minimum(na, limit)
        _check_stride(na, kept, stride)
        return kept, None
    total = na + nb
    if strategy == "longest_first":
        short = np.minimum(na, nb)
        long_ = np.maximum(na, nb)
        # the longer one never ends up shorter than the shorter one: past that both are halved
        long_kept = np.where(short > limit, short, np.minimum(long_, np.maximum(short, limit - short)))
        short_kept = short.copy()
        both = short_kept + long_kept > limit
        short_kept = np.where(both, limit // 2, short_kept)
        long_kept = np.where(both, limit // 2 + limit % 2, long_kept)
        a_is_short = na <= nb
        ka = np.where(a_is_short, short_kept, long_kept)
        kb = np.where(a_is_short, long_kept, short_kept)
        over = total > limit
        ka, kb = np.where(over, ka, na), np.where(over, kb, nb)
        _check_stride(na, ka, stride)
        _check_stride(nb, kb, stride)
        return ka, kb
    over = np.maximum(total - limit, 0)
    target = na if strategy == "only_first" else nb
    if np.any((over > 0) & (target <= over)):
        raise InputError(f"truncation={strategy!r}: the sequence to cut is too short to fit max_length")
    if strategy == "only_first":
        _check_stride(na, na - over, stride)
        return na - over, nb
    _check_stride(nb, nb - over, stride)
    return na, nb - over


def _overflow_windows(rows: _Rows, limit: int, stride: int, from_left: bool):
    """Each row cut into windows of ``limit`` tokens, each overlapping the one before by ``stride``
    (HF ``Encoding::truncate``: the first window is the row, the rest its overflow), and the source
    row of every window."""
    n = rows.lengths
    if limit == 0:  # everything overflows: an empty row, then the whole sequence
        count = np.where(n > 0, 2, 1)
        first = np.repeat(np.arange(n.shape[0]), count)
        second = _ragged_arange(count)
        starts = np.zeros(first.shape[0], np.int64)
        lengths = np.where(second == 1, n[first], 0)
    else:
        # stride == limit leaves no row longer than limit (_check_stride refuses those first), but
        # np.where computes both branches: a step of 0 would warn of a division by zero
        step = max(limit - stride, 1)
        count = np.where(n > limit, 1 + -(-(n - limit) // step), 1)
        first = np.repeat(np.arange(n.shape[0]), count)
        j = _ragged_arange(count)
        if from_left:
            stops = n[first] - j * step
            starts = np.maximum(stops - limit, 0)
        else:
            starts = j * step
            stops = np.minimum(starts + limit, n[first])
        lengths = stops - starts
    offsets = np.zeros(first.shape[0] + 1, np.int64)
    np.cumsum(lengths, out=offsets[1:])
    src = np.repeat(rows.offsets[:-1][first] + starts, lengths) + _ragged_arange(lengths)
    windows = _Rows(rows.ids[src], offsets,
                    None if rows.starts is None else rows.starts[src],
                    None if rows.ends is None else rows.ends[src])
    return windows, first.astype(np.int64)


def _check_stride(before, after, stride: int) -> None:
    """Overflow windows overlap by ``stride`` tokens, so a cut sequence must keep more than that."""
    cut = (after < before) & (after > 0)
    if stride and np.any(cut & (after <= stride)):
        raise InputError(f"stride ({stride}) must be smaller than the tokens max_length leaves to a "
                         f"truncated sequence ({int(after[cut & (after <= stride)].min())})")


def _shape(flat: np.ndarray, out_off, out_len, batched: bool, return_tensors, key: str):
    if return_tensors is None:
        values = flat.tolist()
        if flat.ndim == 2:
            values = [tuple(v) for v in values]
        rows = [values[s:e] for s, e in zip(out_off[:-1].tolist(), out_off[1:].tolist())]
        return rows if batched else rows[0]
    if out_len.size and np.any(out_len != out_len[0]):
        if return_tensors == "np":
            # as transformers: an object array holding one array per row
            rows = np.empty(out_len.shape[0], object)
            for i, (s, e) in enumerate(zip(out_off[:-1].tolist(), out_off[1:].tolist())):
                rows[i] = flat[s:e]
            return rows
        raise InputError(f"cannot make one tensor of rows of different lengths ({key}); pass padding=True "
                         "or truncation=True")
    width = int(out_len[0]) if out_len.size else 0
    arr = flat.reshape((out_len.shape[0], width) + flat.shape[1:])
    return _tensor(arr, return_tensors)


def _shape_lengths(out_len, batched, return_tensors):
    if return_tensors is None:
        return out_len.tolist() if batched else [int(out_len[0])]
    return _tensor(out_len, return_tensors)


def _tensor(arr: np.ndarray, return_tensors: str) -> Any:
    if return_tensors == "np":
        return arr
    if return_tensors == "pt":
        try:
            import torch
        except ImportError:
            raise MissingDependencyError("return_tensors='pt' needs torch (pip install torch); "
                                         "return_tensors='np' needs nothing extra") from None
        return torch.from_numpy(np.ascontiguousarray(arr))
    raise InputError(f"return_tensors must be None, 'np' or 'pt', not {return_tensors!r}")
