"""A ``sentencepiece.SentencePieceProcessor``-shaped surface over tokjit's ``.model`` tokenizers.

``SentencePieceProcessor(model_file="tokenizer.model")`` answers sentencepiece's common calls
(``encode(out_type=int|str, add_bos, add_eos, reverse)``, ``decode`` of ids or pieces, piece and id
lookups, ``bos_id()`` ...) with sentencepiece's results; the CamelCase names (``EncodeAsIds``) are
aliases as in sentencepiece. Sampling (subword regularisation, n-best) is not implemented: those
options raise ``NotImplementedError`` rather than return deterministic ids that look sampled.
"""

from __future__ import annotations

import os
from typing import Sequence

import numpy as np

from tokjit.errors import InputError, UnsupportedComponentError
from tokjit.spec import TokenType

__all__ = ["SentencePieceProcessor", "PieceIdOutOfRangeError"]

_SPACE = "\u2581"


class PieceIdOutOfRangeError(InputError, IndexError):
    """A piece id outside the vocabulary (sentencepiece raises ``IndexError`` here)."""


def _no_sampling(enable_sampling, nbest_size, alpha) -> None:
    if enable_sampling or nbest_size is not None or alpha is not None:
        raise UnsupportedComponentError(
            "sampling (enable_sampling / nbest_size / alpha) is not implemented in tokjit: it could not "
            "reproduce sentencepiece's random draws; encode without it for the deterministic ids")


class SentencePieceProcessor:
    """sentencepiece's processor over a tokjit tokenizer loaded from a SentencePiece ``.model``."""

    def __init__(self, model_file=None, model_proto: bytes | None = None, out_type=int, add_bos: bool = False,
                 add_eos: bool = False, reverse: bool = False, emit_unk_piece: bool = False,
                 enable_sampling: bool = False, nbest_size: int | None = None, alpha: float | None = None,
                 num_threads: int | None = None):
        _no_sampling(enable_sampling, nbest_size, alpha)
        self._out_type = out_type
        self._add_bos = add_bos
        self._add_eos = add_eos
        self._reverse = reverse
        self._emit_unk_piece = emit_unk_piece
        self._num_threads = num_threads
        self.tokenizer = None
        if model_file is not None or model_proto is not None:
            self.Load(model_file=model_file, model_proto=model_proto)

    # ----------------------------------------------------------------------------------------------
    # loading
    # ----------------------------------------------------------------------------------------------

    def Load(self, model_file=None, model_proto: bytes | None = None) -> bool:
        from tokjit.api import load, load_bytes
        if model_proto is not None:
            tok = load_bytes(bytes(model_proto), fmt="sentencepiece")
        else:
            tok = load(os.fspath(model_file), fmt="sentencepiece")
        self._attach(tok)
        return True

    def LoadFromSerializedProto(self, serialized: bytes) -> bool:
        return self.Load(model_proto=serialized)

    @classmethod
    def from_tokenizer(cls, tokenizer, **options) -> "SentencePieceProcessor":
        """Wrap an already loaded SentencePiece-format tokenizer."""
        self = cls(**options)
        self._attach(tokenizer)
        return self

    def _attach(self, tok) -> None:
        spec = tok.spec
        if spec.source.get("format") != "sentencepiece":
            raise InputError(f"SentencePieceProcessor needs a SentencePiece .model, got a "
                             f"{spec.source.get('format')} tokenizer")
        self.tokenizer = tok
        self._pieces = list(spec.source.get("token_strings") or [tok.id_to_token(i) for i in range(len(spec.tokens))])
        self._piece_ids = {}
        for i, piece in enumerate(self._pieces):
            self._piece_ids.setdefault(piece, i)
        self._types = np.asarray(spec.token_types)
        self._scores = spec.scores
        self._unk = spec.unk_id if spec.unk_id is not None else -1

    def _tok(self):
        if self.tokenizer is None:
            raise InputError("no model loaded: SentencePieceProcessor(model_file=...) or .Load(model_file=...)")
        return self.tokenizer

    # ----------------------------------------------------------------------------------------------
    # vocabulary
    # ----------------------------------------------------------------------------------------------

    def get_piece_size(self) -> int:
        return len(self._tok().spec.tokens)

    vocab_size = GetPieceSize = piece_size = get_piece_size

    def __len__(self) -> int:
        return self.get_piece_size()

    def _check_id(self, tid: int) -> int:
        if not 0 <= tid < len(self._pieces):
            raise PieceIdOutOfRangeError(f"piece id {tid} is out of range (vocabulary of {len(self._pieces)})")
        return tid

    def id_to_piece(self, id):
        if isinstance(id, (list, tuple, np.ndarray)):
            return [self.id_to_piece(int(i)) for i in id]
        return self._pieces[self._check_id(id)]

    IdToPiece = id_to_piece

    def piece_to_id(self, piece):
        """The id of a piece, or ``unk_id()`` for a string that is not a piece."""
        if isinstance(piece, (list, tuple)):
            return [self.piece_to_id(p) for p in piece]
        self._tok()
        return self._piece_ids.get(piece, self._unk)

    PieceToId = piece_to_id

    def __getitem__(self, piece: str) -> int:
        return self.piece_to_id(piece)

    def _special(self, tid) -> int:
        self._tok()
        return -1 if tid is None else int(tid)

    def unk_id(self) -> int:
        return self._special(self._tok().spec.unk_id)

    def bos_id(self) -> int:
        return self._special(self._tok().spec.bos_id)

    def eos_id(self) -> int:
        return self._special(self._tok().spec.eos_id)

    def pad_id(self) -> int:
        return self._special(self._tok().spec.pad_id)

    def get_score(self, id):
        if isinstance(id, (list, tuple, np.ndarray)):
            return [self.get_score(int(i)) for i in id]
        self._check_id(id)
        return 0.0 if self._scores is None else float(self._scores[id])

    GetScore = get_score

    def _is_type(self, id, kind) -> bool:
        if isinstance(id, (list, tuple, np.ndarray)):
            return [self._is_type(int(i), kind) for i in id]
        return bool(self._types[self._check_id(id)] == kind)

    def is_control(self, id):
        return self._is_type(id, TokenType.CONTROL)

    def is_unknown(self, id):
        return self._is_type(id, TokenType.UNKNOWN)

    def is_unused(self, id):
        return self._is_type(id, TokenType.UNUSED)

    def is_byte(self, id):
        return self._is_type(id, TokenType.BYTE)

    IsControl, IsUnknown, IsUnused, IsByte = is_control, is_unknown, is_unused, is_byte

    # ----------------------------------------------------------------------------------------------
    # encoding
    # ----------------------------------------------------------------------------------------------

    def encode(self, input, out_type=None, add_bos=None, add_eos=None, reverse=None, emit_unk_piece=None,
               enable_sampling=None, nbest_size=None, alpha=None, num_threads=None):
        """Ids (``out_type=int``) or pieces (``out_type=str``) of a text, or of each text of a list."""
        _no_sampling(enable_sampling, nbest_size, alpha)
        out_type = self._out_type if out_type is None else out_type
        add_bos = self._add_bos if add_bos is None else add_bos
        add_eos = self._add_eos if add_eos is None else add_eos
        reverse = self._reverse if reverse is None else reverse
        emit_unk_piece = self._emit_unk_piece if emit_unk_piece is None else emit_unk_piece
        num_threads = self._num_threads if num_threads is None else num_threads
        if out_type not in (int, str):
            raise UnsupportedComponentError(f"out_type={out_type!r} is not supported (int or str)")
        tok = self._tok()
        bos = self._extra_id("BOS", tok.spec.bos_id) if add_bos else None
        eos = self._extra_id("EOS", tok.spec.eos_id) if add_eos else None
        if isinstance(input, list):
            threads = num_threads if num_threads is not None and num_threads > 0 else None
            batch = tok.encode_batch(input, num_threads=threads)
            return [self._finish(text, ids, out_type, bos, eos, reverse, emit_unk_piece)
                    for text, ids in zip(input, batch)]
        return self._finish(input, tok.encode(input), out_type, bos, eos, reverse, emit_unk_piece)

    Encode = encode

    def _extra_id(self, what: str, tid) -> int:
        if tid is None or not self._types[tid] == TokenType.CONTROL:
            raise InputError(f"{what} token is not defined as a control symbol in this model")
        return int(tid)

    def _finish(self, text, ids, out_type, bos, eos, reverse, emit_unk_piece):
        pieces = None
        if out_type is str:
            pieces = self._pieces_of(text, ids, emit_unk_piece)
            if reverse:
                pieces.reverse()
            if bos is not None:
                pieces.insert(0, self._pieces[bos])
            if eos is not None:
                pieces.append(self._pieces[eos])
            return pieces
        if reverse:
            ids.reverse()
        if bos is not None:
            ids.insert(0, bos)
        if eos is not None:
            ids.append(eos)
        return ids

    def _pieces_of(self, text: str, ids: list[int], emit_unk_piece: bool) -> list[str]:
        pieces = [self._pieces[i] for i in ids]
        unk = self._unk
        if emit_unk_piece or unk not in ids:
            return pieces
        # sentencepiece shows an unknown piece as the normalized text it covers: walk the normalized
        # text, where the known pieces' strings sit back to back and each unknown run fills the gap
        # up to the next known piece
        tok = self._tok()
        normalized = tok._normalize_text(text) if tok.normalizer is not None else text
        out, pos = [], 0
        for k, (tid, piece) in enumerate(zip(ids, pieces)):
            if tid != unk:
                if not normalized.startswith(piece, pos):
                    return pieces  # the walk lost its place: keep piece names rather than guess
                out.append(piece)
                pos += len(piece)
                continue
            nxt = next((p for t, p in zip(ids[k + 1:], pieces[k + 1:]) if t != unk), None)
            end = len(normalized) if nxt is None else normalized.find(nxt, pos + 1)
            if end <= pos:
                return pieces
            out.append(normalized[pos:end])
            pos = end
        return out if pos == len(normalized) else pieces

    def encode_as_ids(self, input, **kwargs):
        return self.encode(input, out_type=int, **kwargs)

    def encode_as_pieces(self, input, **kwargs):
        return self.encode(input, out_type=str, **kwargs)

    EncodeAsIds, EncodeAsPieces = encode_as_ids, encode_as_pieces

    def _sampling(self, *args, **kwargs):
        _no_sampling(True, None, None)

    sample_encode_as_ids = sample_encode_as_pieces = nbest_encode_as_ids = nbest_encode_as_pieces = _sampling
    sample_encode_and_score = calculate_entropy = _sampling
    SampleEncodeAsIds = SampleEncodeAsPieces = NBestEncodeAsIds = NBestEncodeAsPieces = _sampling

    # ----------------------------------------------------------------------------------------------
    # decoding
    # ----------------------------------------------------------------------------------------------

    def decode(self, input, out_type=str, num_threads=None):
        """Text of ids or pieces, or of each sequence of a list of them."""
        if out_type is not str:
            raise UnsupportedComponentError(f"out_type={out_type!r} is not supported (str)")
        if isinstance(input, np.ndarray):
            input = input.tolist()
        if isinstance(input, (int, np.integer)):
            return self.decode_ids([int(input)])
        if isinstance(input, str):
            return self.decode_pieces([input])
        if not input:
            return ""
        first = input[0]
        if isinstance(first, (list, tuple, np.ndarray)):
            return [self.decode(x) for x in input]
        if isinstance(first, str):
            return self.decode_pieces(input)
        return self.decode_ids(input)

    Decode = decode

    def decode_ids(self, ids: Sequence[int]) -> str:
        ids = [int(i) for i in ids]
        for tid in ids:
            self._check_id(tid)
        return self._tok().decode(ids)

    def decode_pieces(self, pieces: Sequence[str]) -> str:
        """Known pieces decode as their ids do; a string that is not a piece stands for itself
        (that is how sentencepiece shows unknown text); ``<unk>`` itself becomes `` ⁇ ``."""
        tok = self._tok()
        unk = self._unk
        unk_piece = self._pieces[unk] if unk >= 0 else None
        out: list[str] = []
        run: list[int] = []
        first_piece: list[str] = []

        def flush():
            if not run:
                return
            text = tok.decode(run)
            if out and first_piece and first_piece[0].startswith(_SPACE) and not text.startswith(" "):
                text = " " + text  # decode drops a leading space only at the start of the text
            out.append(text)
            run.clear()
            first_piece.clear()

        for piece in pieces:
            tid = self._piece_ids.get(piece)
            if tid is None or (tid == unk and piece != unk_piece):
                flush()
                out.append(piece)
                continue
            if not first_piece and self._types[tid] != TokenType.CONTROL:
                first_piece.append(piece)
            run.append(tid)
        flush()
        return "".join(out)

    DecodeIds, DecodePieces = decode_ids, decode_pieces

    def serialized_model_proto(self) -> bytes:
        path = self._tok().spec.source.get("path")
        if not path or not os.path.isfile(path):
            raise InputError("this model was not loaded from a file; its bytes are not kept")
        with open(path, "rb") as fh:
            return fh.read()
