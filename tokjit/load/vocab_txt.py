"""WordPiece ``vocab.txt`` (one token per line, id = line number) -> :class:`~tokjit.spec.TokenizerSpec`.

A vocab.txt carries no pipeline, so the spec gets the one HF ``tokenizers``'
``BertWordPieceTokenizer`` builds with its defaults, which is what BERT-uncased-style models were
trained with: ``BertNormalizer`` (clean_text, handle_chinese_chars, lowercase, accents stripped
because lowercase is on), ``BertPreTokenizer``, ``WordPiece`` with ``##`` continuations, ``[UNK]``
and 100 characters per word, ``[CLS] ... [SEP]`` (``BertProcessing``) and the ``WordPiece`` decoder.
``[UNK]``, ``[SEP]``, ``[CLS]``, ``[PAD]`` and ``[MASK]`` become special added tokens when the
vocabulary has them. For a cased vocabulary pass ``lowercase=False``.
"""

from __future__ import annotations

import numpy as np

from tokjit.errors import ModelFileError
from tokjit.spec import AddedToken, TokenizerSpec, TokenType

SPECIAL_NAMES = ("[UNK]", "[SEP]", "[CLS]", "[PAD]", "[MASK]")


def load_vocab_txt(path, data: bytes, *, lowercase: bool = True, strip_accents: bool | None = None,
                   clean_text: bool = True, handle_chinese_chars: bool = True,
                   prefix: str = "##") -> TokenizerSpec:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise ModelFileError(f"vocab.txt is not UTF-8 ({exc.reason} at byte {exc.start})", path=path,
                             where=f"line {line}") from None
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()  # the final newline ends the last line, as Rust's BufRead::lines reads it
    # HF reads each line with trim_end(); a repeated token keeps its last id (HashMap insert)
    strings = [ln.rstrip() for ln in lines]
    if not strings:
        raise ModelFileError("empty vocabulary", path=path)
    last_id = {s: i for i, s in enumerate(strings)}
    n = len(strings)
    mask = np.zeros(n, np.bool_)
    mask[list(last_id.values())] = True
    types = np.full(n, TokenType.NORMAL, np.int8)
    types[~mask] = TokenType.UNUSED
    added = []
    for name in SPECIAL_NAMES:
        if name in last_id:
            added.append(AddedToken(name, last_id[name], special=True, normalized=False))
            types[last_id[name]] = TokenType.CONTROL
    added.sort(key=lambda t: t.id)
    cls_id, sep_id = last_id.get("[CLS]"), last_id.get("[SEP]")
    post = None
    if cls_id is not None and sep_id is not None:
        post = {"type": "BertProcessing", "sep": ["[SEP]", sep_id], "cls": ["[CLS]", cls_id]}
    return TokenizerSpec(
        model={"type": "WordPiece", "unk_id": last_id.get("[UNK]"), "unk_token": "[UNK]",
               "continuing_subword_prefix": prefix, "max_input_chars_per_word": 100},
        tokens=[s.encode("utf-8") for s in strings], token_types=types, model_mask=mask,
        normalizer={"type": "BertNormalizer", "clean_text": clean_text,
                    "handle_chinese_chars": handle_chinese_chars, "strip_accents": strip_accents,
                    "lowercase": lowercase},
        pre_tokenizer={"type": "BertPreTokenizer"}, post_processor=post,
        decoder={"type": "WordPiece", "prefix": prefix, "cleanup": True},
        added_tokens=added, unk_id=last_id.get("[UNK]"), pad_id=last_id.get("[PAD]"),
        source={"format": "vocab.txt", "path": None if path is None else str(path), "token_strings": strings},
    )
