"""Model folders and hub ids, read the way ``transformers`` reads them.

``from_pretrained(name_or_path)`` takes a folder holding a tokenizer file (``tokenizer.json``,
``tokenizer.model``, ``spiece.model`` or ``vocab.txt``) or a hub id (``org/name``) already in the local
Hugging Face cache; it never goes to the network. Beside the tokenizer file, ``tokenizer_config.json``
and ``special_tokens_map.json`` name the special tokens, ``model_max_length``, the padding side and the
chat template; :func:`read_tokenizer_config` resolves them with transformers' (v5) precedence:

1. defaults of the tokenizer class named by ``tokenizer_class`` (:data:`CLASS_DEFAULTS`),
2. ``tokenizer_config.json`` (an explicit ``null`` clears a default),
3. ``special_tokens_map.json``, read only when the config has no ``added_tokens_decoder`` (transformers
   treats the map as a legacy file then),
4. the ``padding`` / ``truncation`` sections of ``tokenizer.json`` for what is still unset.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field

from tokjit.errors import ModelFileError, TokenizerFileNotFoundError

TOKENIZER_FILES = ("tokenizer.json", "tokenizer.model", "spiece.model", "vocab.txt")
NAMED_SPECIAL_TOKENS = ("bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token",
                        "mask_token")
# transformers' stand-in for "no limit" (int(1e30)), kept as is so comparisons with it still hold
VERY_LARGE_INTEGER = int(1e30)

_BERT = ("right", ("input_ids", "token_type_ids", "attention_mask"),
         {"unk_token": "[UNK]", "sep_token": "[SEP]", "pad_token": "[PAD]", "cls_token": "[CLS]",
          "mask_token": "[MASK]"})
_ROBERTA = ("right", ("input_ids", "attention_mask"),
            {"bos_token": "<s>", "eos_token": "</s>", "sep_token": "</s>", "cls_token": "<s>",
             "unk_token": "<unk>", "pad_token": "<pad>", "mask_token": "<mask>"})
_GPT2 = ("right", ("input_ids", "attention_mask"),
         {"unk_token": "<|endoftext|>", "bos_token": "<|endoftext|>", "eos_token": "<|endoftext|>"})

# Class attributes and constructor defaults of transformers 5 tokenizer classes, keyed by the
# ``tokenizer_class`` a config names ("...Fast" names the same class): padding side, model inputs
# (whether ``token_type_ids`` is returned by default) and the special tokens the class fills in when
# the config leaves them out. A class not listed behaves like transformers' generic backend.
CLASS_DEFAULTS: dict[str, tuple[str, tuple[str, ...], dict[str, str]]] = {
    "LlamaTokenizer": ("left", ("input_ids", "attention_mask"),
                       {"unk_token": "<unk>", "bos_token": "<s>", "eos_token": "</s>"}),
    "CodeLlamaTokenizer": ("left", ("input_ids", "attention_mask"),
                           {"unk_token": "<unk>", "bos_token": "<s>", "eos_token": "</s>"}),
    "GemmaTokenizer": ("left", ("input_ids", "attention_mask"),
                       {"unk_token": "<unk>", "bos_token": "<bos>", "eos_token": "<eos>", "pad_token": "<pad>",
                        "mask_token": "<mask>"}),
    "Siglip2Tokenizer": ("left", ("input_ids", "attention_mask"),
                         {"unk_token": "<unk>", "bos_token": "<bos>", "eos_token": "<eos>", "pad_token": "<pad>",
                          "mask_token": "<mask>"}),
    "CohereTokenizer": ("left", ("input_ids", "attention_mask"),
                        {"unk_token": "<UNK>", "bos_token": "<BOS_TOKEN>", "eos_token": "<|END_OF_TURN_TOKEN|>",
                         "pad_token": "<PAD>", "cls_token": "<CLS>", "sep_token": "<SEP>",
                         "mask_token": "<MASK_TOKEN>"}),
    "XLNetTokenizer": ("left", ("input_ids", "attention_mask"),
                       {"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>", "sep_token": "<sep>",
                        "pad_token": "<pad>", "cls_token": "<cls>", "mask_token": "<mask>"}),
    "GPT2Tokenizer": _GPT2,
    "WhisperTokenizer": _GPT2,
    "GPTNeoXTokenizer": ("right", ("input_ids", "attention_mask"),
                         {**_GPT2[2], "pad_token": "<|padding|>"}),
    "Qwen2Tokenizer": ("right", ("input_ids", "attention_mask"),
                       {"unk_token": "<|endoftext|>", "eos_token": "<|endoftext|>", "pad_token": "<|endoftext|>"}),
    "CLIPTokenizer": ("right", ("input_ids", "attention_mask"),
                      {"unk_token": "<|endoftext|>", "bos_token": "<|startoftext|>", "eos_token": "<|endoftext|>",
                       "pad_token": "<|endoftext|>"}),
    "T5Tokenizer": ("right", ("input_ids", "attention_mask"),
                    {"eos_token": "</s>", "unk_token": "<unk>", "pad_token": "<pad>"}),
    "PegasusTokenizer": ("right", ("input_ids", "attention_mask"),
                         {"pad_token": "<pad>", "eos_token": "</s>", "unk_token": "<unk>", "mask_token": "<mask_2>"}),
    "BertTokenizer": _BERT,
    "ElectraTokenizer": _BERT,
    "DistilBertTokenizer": ("right", ("input_ids", "attention_mask"), {}),
    "DebertaV2Tokenizer": ("right", ("input_ids", "attention_mask", "token_type_ids"),
                           {"bos_token": "[CLS]", "eos_token": "[SEP]", "unk_token": "[UNK]", "sep_token": "[SEP]",
                            "pad_token": "[PAD]", "cls_token": "[CLS]", "mask_token": "[MASK]"}),
    "AlbertTokenizer": ("right", ("input_ids", "attention_mask"),
                        {"bos_token": "[CLS]", "eos_token": "[SEP]", "unk_token": "<unk>", "sep_token": "[SEP]",
                         "pad_token": "<pad>", "cls_token": "[CLS]", "mask_token": "[MASK]"}),
    "MPNetTokenizer": ("right", ("input_ids", "attention_mask"), {**_ROBERTA[2], "unk_token": "[UNK]"}),
    "RobertaTokenizer": _ROBERTA,
    "XLMRobertaTokenizer": _ROBERTA,
    "CamembertTokenizer": _ROBERTA,
    "BartTokenizer": _ROBERTA,
    "LongformerTokenizer": _ROBERTA,
    "MBartTokenizer": _ROBERTA,
    "NllbTokenizer": _ROBERTA,
    "BigBirdTokenizer": ("right", ("input_ids", "attention_mask"),
                         {"unk_token": "<unk>", "bos_token": "<s>", "eos_token": "</s>", "pad_token": "<pad>",
                          "sep_token": "[SEP]", "mask_token": "[MASK]", "cls_token": "[CLS]"}),
}
_GENERIC = ("right", ("input_ids", "attention_mask"), {})


@dataclass
class TokenizerConfig:
    """What a model folder says around its tokenizer file, resolved as transformers resolves it."""

    special_tokens: dict[str, str | None]  # bos_token ... mask_token, then model-specific names
    extra_special_tokens: list[str]
    model_max_length: int = VERY_LARGE_INTEGER
    padding_side: str = "right"
    truncation_side: str = "right"
    model_input_names: list[str] = field(default_factory=lambda: ["input_ids", "attention_mask"])
    clean_up_tokenization_spaces: bool = False
    # set only when the config names them: transformers then rebuilds the post-processor from them
    add_bos_token: bool | None = None
    add_eos_token: bool | None = None
    raw: dict = field(default_factory=dict)  # tokenizer_config.json with the resolved tokens merged in

    @property
    def rebuilds_template(self) -> bool:
        return self.add_bos_token is not None or self.add_eos_token is not None


def token_string(value) -> str | None:
    """A special token as configs write it: a string or a serialized ``AddedToken`` dict."""
    if isinstance(value, dict):
        value = value.get("content")
    return value if isinstance(value, str) else None


def _read_json(path):
    try:
        with open(path, "rb") as fh:
            doc = json.load(fh)
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise ModelFileError(f"cannot read JSON ({exc})", path=path) from None
    if not isinstance(doc, dict):
        raise ModelFileError("expected a JSON object", path=path)
    return doc


def read_tokenizer_config(folder, tokenizer_json: dict | None = None) -> TokenizerConfig | None:
    """The resolved :class:`TokenizerConfig` of ``folder``; ``None`` without either config file."""
    cfg = _read_json(os.path.join(folder, "tokenizer_config.json"))
    stm = _read_json(os.path.join(folder, "special_tokens_map.json"))
    if cfg is None and stm is None:
        return None
    cfg = dict(cfg or {})
    cls = str(cfg.get("tokenizer_class") or "")
    padding_side, input_names, defaults = CLASS_DEFAULTS.get(cls.removesuffix("Fast"), _GENERIC)

    kwargs: dict = {}
    for name, value in defaults.items():
        kwargs[name] = value
    kwargs.update(cfg)
    if stm is not None and "added_tokens_decoder" not in cfg:
        for key, value in stm.items():
            if key in ("extra_special_tokens", "additional_special_tokens") and isinstance(value, list):
                merged = list(kwargs.get(key) or [])
                for tok in value:
                    if token_string(tok) not in [token_string(t) for t in merged]:
                        merged.append(tok)
                value = merged
            kwargs[key] = value

    tj = tokenizer_json or {}
    padding = tj.get("padding") if isinstance(tj.get("padding"), dict) else None
    truncation = tj.get("truncation") if isinstance(tj.get("truncation"), dict) else None
    if padding is not None:
        kwargs.setdefault("pad_token", padding.get("pad_token"))
        kwargs.setdefault("padding_side", str(padding.get("direction", "Right")).lower())
    if truncation is not None:
        kwargs.setdefault("truncation_side", str(truncation.get("direction", "Right")).lower())

    named: dict[str, str | None] = {name: token_string(kwargs.get(name)) for name in NAMED_SPECIAL_TOKENS}
    # any other string-valued "*_token" key is a model-specific special token (Gemma's image_token)
    for key, value in kwargs.items():
        if key.endswith("_token") and key not in named and isinstance(value, str):
            named[key] = value
    extra_raw = kwargs.get("extra_special_tokens")
    if extra_raw is None:
        extra_raw = kwargs.get("additional_special_tokens")
    extra: list[str] = []
    if isinstance(extra_raw, dict):
        for key, value in extra_raw.items():
            if token_string(value) is not None:
                named[key] = token_string(value)
    elif isinstance(extra_raw, list):
        extra = [s for s in map(token_string, extra_raw) if s is not None]

    max_len = kwargs.get("model_max_length", kwargs.get("max_len"))
    model_max_length = VERY_LARGE_INTEGER if max_len is None else int(max_len)
    side = kwargs.get("padding_side", padding_side)
    tside = kwargs.get("truncation_side", "right")
    for what, value in (("padding_side", side), ("truncation_side", tside)):
        if value not in ("left", "right"):
            raise ModelFileError(f"{what} must be 'left' or 'right', not {value!r}",
                                 path=os.path.join(folder, "tokenizer_config.json"))
    raw = dict(cfg)
    raw.update({k: v for k, v in named.items() if v is not None})
    return TokenizerConfig(
        special_tokens=named, extra_special_tokens=extra, model_max_length=model_max_length,
        padding_side=side, truncation_side=tside,
        model_input_names=list(kwargs.get("model_input_names") or input_names),
        clean_up_tokenization_spaces=bool(kwargs.get("clean_up_tokenization_spaces", False)),
        add_bos_token=cfg.get("add_bos_token") if "add_bos_token" in cfg else None,
        add_eos_token=cfg.get("add_eos_token") if "add_eos_token" in cfg else None,
        raw=raw)


def hub_cache_dirs() -> list[str]:
    """Where transformers looks for downloaded repositories, most specific first."""
    dirs = []
    if os.environ.get("HF_HUB_CACHE"):
        dirs.append(os.environ["HF_HUB_CACHE"])
    if os.environ.get("HF_HOME"):
        dirs.append(os.path.join(os.environ["HF_HOME"], "hub"))
    xdg = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    dirs.append(os.path.join(xdg, "huggingface", "hub"))
    seen, out = set(), []
    for d in dirs:
        if d not in seen:
            seen.add(d)
            out.append(d)
    return out


def resolve_pretrained(name_or_path, *, revision: str = "main", cache_dir=None) -> str:
    """The local folder for a folder path or a cached hub id (``org/name``); never the network."""
    path = os.fspath(name_or_path)
    if os.path.isdir(path):
        return path
    looked = []
    if path.count("/") <= 1 and not path.startswith((".", "/")) and path:
        repo_dir_name = "models--" + path.replace("/", "--")
        for root in ([os.fspath(cache_dir)] if cache_dir is not None else hub_cache_dirs()):
            repo = os.path.join(root, repo_dir_name)
            looked.append(repo)
            snapshot = _snapshot(repo, revision)
            if snapshot is not None:
                return snapshot
    where = ", ".join(looked) if looked else path
    raise TokenizerFileNotFoundError(
        f"{path!r} is not a folder and no cached hub snapshot of it (revision {revision!r}) was found; "
        f"looked in: {where} (tokjit never downloads: fetch it with huggingface_hub first, or set "
        f"HF_HUB_CACHE / HF_HOME)")


def _snapshot(repo: str, revision: str) -> str | None:
    snapshots = os.path.join(repo, "snapshots")
    if not os.path.isdir(snapshots):
        return None
    commit = revision
    ref = os.path.join(repo, "refs", revision)
    if os.path.isfile(ref):
        with open(ref, encoding="utf-8") as fh:
            commit = fh.read().strip()
    folder = os.path.join(snapshots, commit)
    return folder if os.path.isdir(folder) else None


