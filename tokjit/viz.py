"""A tokenization viewer: :meth:`Tokenizer.explain` returns an :class:`Explanation`, which Jupyter
renders as the text with each token coloured inline (id, piece and byte span on hover), special and
byte-fallback tokens marked, and bytes that are not whole UTF-8 characters shown as hex.

The view is built from the byte span each token covers in the *original* text, so it shows what the
user wrote, not the normalized form; the piece as the vocabulary spells it is in the hover text.
Every piece of text goes through :func:`html.escape`: tokenizing untrusted text and displaying it in
a notebook cannot inject markup.
"""

from __future__ import annotations

import html

import numpy as np

from tokjit.spec import TokenType
from tokjit.text import text_to_utf8

# pastel backgrounds, distinguishable next to each other, readable with black text
_PALETTE = ("#ffd6a5", "#caffbf", "#9bf6ff", "#bdb2ff", "#ffc6ff", "#fdffb6", "#a0c4ff", "#ffadad")

NORMAL, SPECIAL, BYTE, UNKNOWN = "normal", "special", "byte", "unknown"


class Explanation:
    """Ids of one text with, per token: byte span in the text (``-1`` for tokens the post-processor
    added), kind (``normal``/``special``/``byte``/``unknown``) and the vocabulary's spelling."""

    def __init__(self, tokenizer_name: str, text_bytes: bytes, ids: list[int], starts: list[int],
                 ends: list[int], kinds: list[str], pieces: list[str]):
        self.tokenizer_name = tokenizer_name
        self.text_bytes = text_bytes
        self.ids = ids
        self.starts = starts
        self.ends = ends
        self.kinds = kinds
        self.pieces = pieces

    def __len__(self) -> int:
        return len(self.ids)

    @property
    def byte_offsets(self) -> list[tuple[int, int]]:
        return list(zip(self.starts, self.ends))

    def token_bytes(self, i: int) -> bytes:
        """The bytes of the original text token ``i`` covers (``b""`` for added special tokens)."""
        s, e = self.starts[i], self.ends[i]
        return b"" if s < 0 else self.text_bytes[s:e]

    def rows(self) -> list[dict]:
        """One dict per token (for tables / DataFrames)."""
        return [{"id": t, "piece": p, "kind": k, "start": s, "end": e,
                 "text": _show_bytes(self.token_bytes(i))}
                for i, (t, p, k, s, e) in enumerate(zip(self.ids, self.pieces, self.kinds, self.starts,
                                                        self.ends))]

    def __repr__(self) -> str:
        shown = " | ".join(f"{_show_bytes(self.token_bytes(i)) or self.pieces[i]}:{t}"
                           for i, t in enumerate(self.ids[:24]))
        more = " ..." if len(self.ids) > 24 else ""
        return f"Explanation({self.tokenizer_name}, {len(self.ids)} tokens: {shown}{more})"

    def _repr_html_(self) -> str:
        return self.to_html()

    def to_html(self) -> str:
        out = ['<div class="tokjit-explain" style="font-family:ui-monospace,monospace;'
               'line-height:1.9;white-space:pre-wrap;word-break:break-all">']
        n_bytes = len(self.text_bytes)
        header = (f"{self.tokenizer_name}: {len(self.ids)} tokens, {n_bytes} bytes"
                  f" ({n_bytes / max(len(self.ids), 1):.2f} bytes/token)")
        out.append(f'<div style="font-family:sans-serif;font-size:85%;color:#555">{html.escape(header)}</div>')
        cursor = 0
        for i, tid in enumerate(self.ids):
            s, e, kind = self.starts[i], self.ends[i], self.kinds[i]
            if s >= 0 and s > cursor:  # text no token covers (e.g. whitespace BERT drops)
                out.append(f'<span style="color:#999">{html.escape(_show_bytes(self.text_bytes[cursor:s]))}</span>')
            if s < 0:
                shown = self.pieces[i]
            elif s < cursor:  # shares bytes with the previous token (byte fallback of one character)
                shown = _show_bytes(self.text_bytes[max(s, cursor):e]) or "\u00b7"
            else:
                shown = _show_bytes(self.text_bytes[s:e]) or "\u00b7"
            if s >= 0:
                cursor = max(cursor, e)
            out.append(_token_span(i, tid, shown, self.pieces[i], kind, s, e))
        if cursor < n_bytes:
            out.append(f'<span style="color:#999">{html.escape(_show_bytes(self.text_bytes[cursor:]))}</span>')
        out.append("</div>")
        return "".join(out)


def _show_bytes(data: bytes) -> str:
    """Text for display: whole characters as themselves, bytes of partial characters as ``\\xNN``."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        text = data.decode("utf-8", "backslashreplace")
    return text.replace("\n", "\u21b5\n").replace("\t", "\u2192")


def _token_span(i: int, tid: int, shown: str, piece: str, kind: str, s: int, e: int) -> str:
    title = f"#{i}  id {tid}  {piece!r}  {kind}" + (f"  bytes {s}-{e}" if s >= 0 else "  (added)")
    if kind == SPECIAL:
        style = "background:#222;color:#ffd166;font-weight:bold"
    elif kind == BYTE:
        style = f"background:{_PALETTE[i % len(_PALETTE)]};outline:1px dashed #c00;color:#800"
    elif kind == UNKNOWN:
        style = "background:#f66;color:#fff"
    else:
        style = f"background:{_PALETTE[i % len(_PALETTE)]}"
    return (f'<span title="{html.escape(title, quote=True)}" data-id="{int(tid)}" '
            f'style="{style};border-radius:3px;padding:1px 1px;margin:0 1px">{html.escape(shown)}</span>')


def _kinds(tok, ids: np.ndarray) -> list[str]:
    spec = tok.spec
    types = np.asarray(spec.token_types)
    special = tok._special_ids
    out = []
    for t in ids.tolist():
        ty = int(types[t]) if t < types.shape[0] else TokenType.NORMAL
        if t < special.shape[0] and special[t]:
            out.append(SPECIAL)
        elif ty == TokenType.BYTE:
            out.append(BYTE)
        elif ty == TokenType.UNKNOWN or (spec.unk_id is not None and t == spec.unk_id):
            out.append(UNKNOWN)
        else:
            out.append(NORMAL)
    return out


def explain(tok, text: str, *, parse_special: bool = False, add_special_tokens: bool = False) -> Explanation:
    """See :meth:`tokjit.Tokenizer.explain`."""
    buf = text_to_utf8(text)
    ids, starts, ends = tok._encode_array(buf, parse_special, want_spans=True)
    ids = np.asarray(ids, np.int64)
    starts = np.asarray(starts, np.int64).tolist()
    ends = np.asarray(ends, np.int64).tolist()
    if add_special_tokens:
        full = np.asarray(tok.post_process(ids.tolist()), np.int64)
        # the post-processor wraps the ids (BOS ... EOS, [CLS] ... [SEP]): find them inside
        k = _find_run(full, ids)
        if k is not None:
            starts = [-1] * k + starts + [-1] * (full.shape[0] - k - ids.shape[0])
            ends = [-1] * k + ends + [-1] * (full.shape[0] - k - ids.shape[0])
            ids = full
    id_list = ids.tolist()
    kinds = _kinds(tok, ids)
    if tok.normalizer is not None:
        starts, ends = _snap_to_characters(buf, starts, ends, kinds)
    pieces = [tok.id_to_token(t) for t in id_list]
    return Explanation(tok.name, buf.tobytes(), id_list, starts, ends, kinds, pieces)


def _snap_to_characters(buf: np.ndarray, starts: list[int], ends: list[int], kinds: list[str]):
    """Widen spans to whole characters. After a normalizer, a span maps back through an alignment
    that can land inside a character (a character the normalizer rewrote or padded with spaces);
    only byte-fallback tokens really cover part of a character, so only they keep byte spans."""
    n = buf.shape[0]
    is_start = np.ones(n + 1, np.bool_)
    is_start[:n] = (buf & 0xC0) != 0x80
    out_s, out_e = [], []
    for s, e, kind in zip(starts, ends, kinds):
        if s >= 0 and kind != BYTE:
            while 0 < s < n and not is_start[s]:
                s -= 1
            while e < n and not is_start[e]:
                e += 1
        out_s.append(s)
        out_e.append(e)
    return out_s, out_e


def _find_run(haystack: np.ndarray, needle: np.ndarray) -> int | None:
    n, m = haystack.shape[0], needle.shape[0]
    for k in range(n - m + 1):
        if np.array_equal(haystack[k:k + m], needle):
            return k
    return None
