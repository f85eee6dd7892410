"""llama.cpp pre-tokenizer table for GGUF vocabularies (``tokenizer.ggml.pre``).

Maps every ``tokenizer.ggml.pre`` string that llama.cpp accepts to the regexes its BPE tokenizer splits
with and the per-pre-type flags it sets. Facts from ggml-org/llama.cpp ``src/llama-vocab.cpp``
(``llama_vocab::impl::load`` and the ``llm_tokenizer_bpe`` constructor) at commit 00ad355e009e83abf98f96a6ded7193b95763681,
and ``src/unicode.cpp`` (``unicode_regex_split``), brought to 0c1e570 (glm4 / glm5, the afmoe splitter for
tiny_aya's digits) and checked there by llama.cpp's ids for every pre value (``tests/data/llamacpp-0c1e570``).
The flags are defaults; GGUF keys override some (see ``GgufPreType``).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "GgufPreType",
    "UnknownPreTypeError",
    "gguf_pre_type",
    "known_pre_types",
    "custom_splitter",
    "GPT2_REGEX",
    "LLAMA3_REGEX",
    "LLAMA3_REGEX_ORIGINAL",
    "KIMI_K2_TRIGGER",
    "AFMOE_DIGITS_TRIGGER",
]

# Regexes are applied in sequence by unicode_regex_split: regex k splits every piece produced by regex k-1,
# matches AND the unmatched text between/after matches are all kept as pieces (nothing is dropped), and
# zero-length matches give empty pieces (harmless). Each regex runs on one piece at a time, so $, (?!\S) and \b
# see the piece end as end of input. Strings are the exact runtime values of llama.cpp's C++ literals: where the
# C++ source wrote "\r\n" (real CR/LF characters) the Python literal below is a plain string holding CR/LF;
# elsewhere a raw string holds a regex escape (backslash-r). Both mean the same to a regex engine.

# Exact strings that unicode_regex_split_custom() recognises and replaces with hand-written splitters.
GPT2_REGEX = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)"
LLAMA3_REGEX = r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
# llama3 regex as written in tokenizer.json; also mapped to the llama3 custom splitter
LLAMA3_REGEX_ORIGINAL = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
# kimi-k2: this one-regex list triggers a hand-written splitter for the whole Kimi pattern (see notes)
KIMI_K2_TRIGGER = r"\p{Han}+"
# afmoe: digit runs split so that the first group has len % 3 digits, then groups of 3 (hand-written)
AFMOE_DIGITS_TRIGGER = r"\p{AFMoE_digits}"

# tiny_aya's digit regex, which llama.cpp (0c1e570) replaces by the afmoe digit splitter
TINY_AYA_DIGITS = r"\d{1,3}(?=(?:\d{3})*\b)"

_CUSTOM = {
    GPT2_REGEX: "gpt2",
    LLAMA3_REGEX: "llama3",
    LLAMA3_REGEX_ORIGINAL: "llama3",
    KIMI_K2_TRIGGER: "kimi_k2",
    AFMOE_DIGITS_TRIGGER: "digit_groups",
    TINY_AYA_DIGITS: "digit_groups",
}


def custom_splitter(regex: str) -> str | None:
    """Name of the hand-written llama.cpp splitter used for ``regex`` (exact string match), else None
    (then llama.cpp runs std::regex on the category-collapsed text if the regex has \\p{..}, else std::wregex)."""
    return _CUSTOM.get(regex)


# --- regex lists, keyed by llama.cpp LLAMA_VOCAB_PRE_TYPE_* name (the switch in llm_tokenizer_bpe) ---
_REGEXES: dict[str, tuple[str, ...]] = {}

_REGEXES['AFMOE'] = (
    r"\p{AFMoE_digits}",
    r"[一-鿿㐀-䶿豈-﫿぀-ゟ゠-ヿ･-ﾟ⼀-⿟เ-๿຀-໿ក-៿က-႟ꩠ-ꩿꧠ-꧿가-힯ᄀ-ᇿ]+",
    '[!"#$%&\'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\\r\\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+',
)

_REGEXES['BAILINGMOE'] = (
    r"'(?:[sSdDmMtT]|[lL][lL]|[vV][eE]|[rR][eE])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]|\s+(?!\S)|\s+",
)

_REGEXES['BLOOM'] = (
    r" ?[^(\s|.,!?…。，、।۔،)]+",
)
_REGEXES['GPT3_FINNISH'] = _REGEXES['BLOOM']
_REGEXES['PORO'] = _REGEXES['BLOOM']

_REGEXES['CHAMELEON'] = (
    r"<sentinel:[0-9]+>",
    r"(IMGIMG)((A|B|C|D|E|F|G|H|I){1,4})Z",
    r"([\t\n]|    |  )",
    r"\p{N}",
    r"[\p{P}!-/:-@\[-`{-~]",
    GPT2_REGEX,
)

_REGEXES['CHATGLM4'] = (
    LLAMA3_REGEX,
)
_REGEXES['DBRX'] = _REGEXES['CHATGLM4']
_REGEXES['LLAMA3'] = _REGEXES['CHATGLM4']
_REGEXES['SMAUG'] = _REGEXES['CHATGLM4']

_REGEXES['CODESHELL'] = (
    r"\p{N}",
    GPT2_REGEX,
)
_REGEXES['COMMAND_R'] = _REGEXES['CODESHELL']
_REGEXES['EXAONE'] = _REGEXES['CODESHELL']
_REGEXES['MELLUM2'] = _REGEXES['CODESHELL']
_REGEXES['MINERVA'] = _REGEXES['CODESHELL']
_REGEXES['REFACT'] = _REGEXES['CODESHELL']
_REGEXES['SMOLLM'] = _REGEXES['CODESHELL']
_REGEXES['STARCODER'] = _REGEXES['CODESHELL']

_REGEXES['DEEPSEEK3_LLM'] = (
    r"\p{N}{1,3}",
    r"[一-龥぀-ゟ゠-ヿ]+",
    '[!"#$%&\'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+',
)
_REGEXES['HUNYUAN_DENSE'] = _REGEXES['DEEPSEEK3_LLM']
_REGEXES['HY_V4'] = _REGEXES['DEEPSEEK3_LLM']
_REGEXES['JOYAI_LLM'] = _REGEXES['DEEPSEEK3_LLM']

_REGEXES['DEEPSEEK_CODER'] = (
    '[\r\n]',
    r"\s?\p{L}+",
    r"\s?\p{P}+",
    r"[一-龥ࠀ-一가-퟿]+",
    r"\p{N}",
)

_REGEXES['DEEPSEEK_LLM'] = (
    '[\r\n]',
    r"\s?[A-Za-zµÀ-ÖØ-öø-ƺƼ-ƿǄ-ʓʕ-ʯͰ-ͳͶͷͻ-ͽͿΆΈ-ΊΌΎ-ΡΣ-ϵϷ-ҁҊ-ԯԱ-ՖႠ-ჅᎠ-Ᏽᏸ-ᏽᲐ-ᲺᲽ-Ჿᴀ-ᴫᵫ-ᵷᵹ-ᶚḀ-ἕἘ-Ἕἠ-ὅὈ-Ὅὐ-ὗὙὛὝὟ-ώᾀ-ᾴᾶ-ᾼιῂ-ῄῆ-ῌῐ-ΐῖ-Ίῠ-Ῥῲ-ῴῶ-ῼℂℇℊ-ℓℕℙ-ℝℤΩℨK-ℭℯ-ℴℹℼ-ℿⅅ-ⅉⅎↃↄⰀ-ⱻⱾ-ⳤⳫ-ⳮⳲⳳꙀ-ꙭꚀ-ꚛꜢ-ꝯꝱ-ꞇꞋ-ꞎꭰ-ꮿﬀ-ﬆﬓ-ﬗＡ-Ｚａ-ｚ𐐀-𐑏𐒰-𐓓𐓘-𐓻𐲀-𐲲𐳀-𐳲𑢠-𑣟𞤀-𞥃]+",
    r"\s?[!-/:-~！-／：-～‘-‟　-。]+",
    r"\s+$",
    r"[一-龥ࠀ-一가-퟿]+",
    r"\p{N}+",
)

_REGEXES['DEFAULT'] = (
    r"[\p{P}\$\+<=>\^~\|]+",
    GPT2_REGEX,
    r"\p{N}+",
    r"[0-9][0-9][0-9]",
)

_REGEXES['EXAONE_MOE'] = (
    r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?(?:\p{L}\p{M}*(?: \p{L}\p{M}*)*)+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]?|\s*[\r\n]|\s+(?!\S)|\s+",
)

_REGEXES['FALCON'] = (
    r"[\p{P}\$\+<=>\^~\|`]+",
    GPT2_REGEX,
    r"[0-9][0-9][0-9]",
)

_REGEXES['GEMMA4'] = (
    r"[^\n]+|[\n]+",
)
_REGEXES['SARVAM_MOE'] = _REGEXES['GEMMA4']

_REGEXES['GPT2'] = (
    GPT2_REGEX,
)
_REGEXES['GRANITE_DOCLING'] = _REGEXES['GPT2']
_REGEXES['JAIS'] = _REGEXES['GPT2']
_REGEXES['MPT'] = _REGEXES['GPT2']
_REGEXES['OLMO'] = _REGEXES['GPT2']
_REGEXES['TRILLION'] = _REGEXES['GPT2']

_REGEXES['GPT4O'] = (
    r"[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))*((?=[\p{L}])([^A-Z]))+(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))+((?=[\p{L}])([^A-Z]))*(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+",
)
_REGEXES['MINIMAX_M2'] = _REGEXES['GPT4O']

_REGEXES['GRANITE_EMB_MULTI'] = (
    r"[^\r\n\p{L}\p{N}]?((?=[\p{L}\p{M}])([^a-z]))*((?=[\p{L}\p{M}])([^A-Z]))+(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|[^\r\n\p{L}\p{N}]?((?=[\p{L}\p{M}])([^a-z]))+((?=[\p{L}\p{M}])([^A-Z]))*(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+",
)

_REGEXES['GROK_2'] = (
    r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",
)
_REGEXES['HUNYUAN'] = _REGEXES['GROK_2']
_REGEXES['QWEN2'] = _REGEXES['GROK_2']
_REGEXES['SOLAR_OPEN'] = _REGEXES['GROK_2']
_REGEXES['STABLELM2'] = _REGEXES['GROK_2']

_REGEXES['JAIS2'] = (
    r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s{512}(?!\S)|\s{256}(?!\S)|\s{128}(?!\S)|\s{64}(?!\S)|\s{32}(?!\S)|\s{16}(?!\S)|\s{8}(?!\S)|\s{4}(?!\S)|\s{1,2}(?!\S)|\s{1}",
)

_REGEXES['KIMI_K2'] = (
    r"\p{Han}+",
)

_REGEXES['LAGUNA'] = (
    r"[^\n]+|[\n]+",
    r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",
)

_REGEXES['MINICPM5'] = (
    r"\p{N}{1,3}",
    r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}+| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",
)

_REGEXES['QWEN35'] = (
    r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",
)

_REGEXES['SEED_CODER'] = (
    r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1}| ?[^\s\p{L}\p{N}\r\n]+|\s*[\r\n]+|\s+(?!\S)|\s+",
)

_REGEXES['SPARK2_5'] = (
    r"\p{N}{1,3}",
    r"[一-龥぀-ゟ゠-ヿ]+",
    '[!"#$%&\'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+|[\r\n]|\\s+(?!\\S)|\\s+',
    r"\p{N}",
)

_REGEXES['SUPERBPE'] = (
    r"\p{N}+",
    r"(?=(\d{3})+(?!\d))",
)

_REGEXES['TEKKEN'] = (
    r"[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))*((?=[\p{L}])([^A-Z]))+|[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))+((?=[\p{L}])([^A-Z]))*|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+",
)

_REGEXES['TINY_AYA'] = (
    r"\d{1,3}(?=(?:\d{3})*\b)",
    r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+",
)

_REGEXES['UFAKZEKA'] = (
    r"[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",
)

_REGEXES['VIKING'] = (
    r" ?[^(\s|.,!?…。，、।۔،)]+",
    r"\p{N}",
)

_REGEXES['WHITESPACE'] = (
    r"\S+",
)

_REGEXES['YOUTU'] = (
    r"[가-힣ㄱ-ㆎ]+|[！…“”‘’—：；，、-〿︰-﹏]+|[ㄅ-ㄯ]+|[一-龥぀-ゟ゠-ヿ]+",
    r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+",
)

# pre types whose BPE runs on raw UTF-8 (no GPT-2 byte-to-unicode mapping; byte fallback via <0xXX> tokens)
_RAW_UTF8 = frozenset({"GEMMA4", "SARVAM_MOE", "WHITESPACE"})


@dataclass(frozen=True)
class GgufPreType:
    """What llama.cpp does for one ``tokenizer.ggml.pre`` value of a BPE (``gpt2``) vocab.

    Flag values are llama.cpp's defaults after ``load`` has seen the pre string. Later in ``load`` the GGUF keys
    ``tokenizer.ggml.add_bos_token`` / ``add_eos_token`` / ``add_sep_token`` / ``add_space_prefix`` /
    ``remove_extra_whitespaces`` / ``normalizer.lowercase`` override them when present (GEMMA4 forces add_bos on).
    """

    name: str  # the tokenizer.ggml.pre string
    pre_type: str  # llama.cpp enum LLAMA_VOCAB_PRE_TYPE_<pre_type>
    regexes: tuple[str, ...]  # applied in sequence (see module comment)
    ignore_merges: bool = False  # a whole pre-token found in the vocab is emitted as one token, merges skipped
    clean_spaces: bool = True  # clean_up_tokenization_spaces (detokenize only)
    add_bos: bool = False
    add_eos: bool = False
    add_sep: bool = False
    add_space_prefix: bool = False
    escape_whitespaces: bool = False  # replace " " by U+2581 before splitting (SPM-style BPE)
    byte_encode: bool = True  # GPT-2 byte-to-unicode mapping of each piece before BPE
    bos_disabled: bool = False  # special_bos_id set to none (chatglm)
    lowercase: bool | None = None  # forced normalizer lowercase (whitespace pre); None = untouched

    @property
    def custom_splitters(self) -> tuple[str | None, ...]:
        """Per regex: name of the hand-written splitter llama.cpp uses, or None."""
        return tuple(custom_splitter(r) for r in self.regexes)


def _t(name: str, pre_type: str, **flags: object) -> GgufPreType:
    if pre_type in _RAW_UTF8:
        flags.setdefault("byte_encode", False)
    return GgufPreType(name=name, pre_type=pre_type, regexes=_REGEXES[pre_type], **flags)  # type: ignore[arg-type]


# --- pre string -> type, in the order of llama_vocab::impl::load ---
_PRE_TYPES: dict[str, GgufPreType] = {}
for _t_ in (
    _t('default', 'DEFAULT'),
    _t('minicpm5', 'MINICPM5', ignore_merges=True),
    _t('llama3', 'LLAMA3', ignore_merges=True, add_bos=True),
    _t('llama-v3', 'LLAMA3', ignore_merges=True, add_bos=True),
    _t('llama-bpe', 'LLAMA3', ignore_merges=True, add_bos=True),
    _t('falcon3', 'LLAMA3', ignore_merges=True, add_bos=True),
    _t('falcon-h1', 'LLAMA3', ignore_merges=True, add_bos=True),
    _t('pixtral', 'LLAMA3', ignore_merges=True, add_bos=True),
    _t('midm-2.0', 'LLAMA3', ignore_merges=True, add_bos=True),
    _t('lfm2', 'LLAMA3', ignore_merges=True, add_bos=True),
    _t('jina-v5-nano', 'LLAMA3', ignore_merges=True, add_bos=True),
    _t('deepseek-llm', 'DEEPSEEK_LLM', clean_spaces=False),
    _t('deepseek-coder', 'DEEPSEEK_CODER', clean_spaces=False),
    _t('deepseek-v3', 'DEEPSEEK3_LLM', clean_spaces=False),
    _t('spark2_5', 'SPARK2_5', clean_spaces=False),
    _t('youtu', 'YOUTU', clean_spaces=False, ignore_merges=True),
    _t('falcon', 'FALCON'),
    _t('mpt', 'MPT'),
    _t('starcoder', 'STARCODER'),
    _t('gpt-2', 'GPT2'),
    _t('phi-2', 'GPT2'),
    _t('jina-es', 'GPT2'),
    _t('jina-de', 'GPT2'),
    _t('gigachat', 'GPT2'),
    _t('jina-v2-es', 'GPT2'),
    _t('jina-v2-de', 'GPT2'),
    _t('a.x-4.0', 'GPT2'),
    _t('mellum', 'GPT2'),
    _t('modern-bert', 'GPT2'),
    _t('jais-2', 'JAIS2'),
    _t('gemma4', 'GEMMA4', escape_whitespaces=True),
    _t('granite-embed-multi-311m', 'GEMMA4', escape_whitespaces=True),
    _t('sarvam-moe', 'SARVAM_MOE', escape_whitespaces=True, clean_spaces=False),
    _t('jina-v1-en', 'GPT2', add_sep=True),
    _t('jina-v2-code', 'GPT2', add_sep=True),
    _t('roberta-bpe', 'GPT2', add_sep=True),
    _t('whitespace', 'WHITESPACE', lowercase=False),
    _t('refact', 'REFACT'),
    _t('command-r', 'COMMAND_R', clean_spaces=False),
    _t('qwen2', 'QWEN2', clean_spaces=False),
    _t('deepseek-r1-qwen', 'QWEN2', clean_spaces=False),
    _t('kormo', 'QWEN2', clean_spaces=False),
    _t('f2llmv2', 'QWEN2', clean_spaces=False),
    _t('qwen35', 'QWEN35', clean_spaces=False),
    _t('stablelm2', 'STABLELM2'),
    _t('olmo', 'OLMO'),
    _t('dbrx', 'DBRX'),
    _t('smaug-bpe', 'SMAUG'),
    _t('poro-chat', 'PORO', clean_spaces=False),
    _t('glm4', 'CHATGLM4', bos_disabled=True, ignore_merges=True),
    _t('glm5', 'CHATGLM4', bos_disabled=True, ignore_merges=True),
    _t('chatglm-bpe', 'CHATGLM4', bos_disabled=True),
    _t('viking', 'VIKING', clean_spaces=False),
    _t('jais', 'JAIS'),
    _t('tekken', 'TEKKEN', clean_spaces=False, ignore_merges=True, add_bos=True),
    _t('smollm', 'SMOLLM', clean_spaces=False),
    _t('codeshell', 'CODESHELL'),
    _t('bloom', 'BLOOM'),
    _t('gpt3-finnish', 'GPT3_FINNISH'),
    _t('exaone', 'EXAONE'),
    _t('exaone4', 'GPT2'),
    _t('exaone-moe', 'EXAONE_MOE'),
    _t('chameleon', 'CHAMELEON', add_bos=True, clean_spaces=False),
    _t('minerva-7b', 'MINERVA'),
    _t('megrez', 'QWEN2'),
    _t('gpt-4o', 'GPT4O', clean_spaces=False),
    _t('llama4', 'GPT4O', clean_spaces=False),
    _t('kanana2', 'GPT4O', clean_spaces=False),
    _t('talkie', 'GPT4O', clean_spaces=False),
    _t('granite-embed-multi-97m', 'GRANITE_EMB_MULTI', clean_spaces=False, ignore_merges=True),
    _t('tiny_aya', 'TINY_AYA', clean_spaces=False),
    _t('cohere2moe', 'TINY_AYA', clean_spaces=False),
    _t('superbpe', 'SUPERBPE', clean_spaces=False),
    _t('trillion', 'TRILLION', clean_spaces=False),
    _t('granite-docling', 'GRANITE_DOCLING', clean_spaces=False),
    _t('bailingmoe', 'BAILINGMOE', clean_spaces=False),
    _t('bailingmoe2', 'BAILINGMOE', clean_spaces=False),
    _t('llada-moe', 'BAILINGMOE', clean_spaces=False),
    _t('seed-coder', 'SEED_CODER', clean_spaces=False),
    _t('hunyuan', 'HUNYUAN', clean_spaces=False),
    _t('hunyuan-dense', 'HUNYUAN_DENSE', clean_spaces=False),
    _t('hy_v4', 'HY_V4', clean_spaces=False),
    _t('joyai-llm', 'JOYAI_LLM', clean_spaces=False),
    _t('kimi-k2', 'KIMI_K2', clean_spaces=False),
    _t('ufakzeka', 'UFAKZEKA', clean_spaces=False),
    _t('grok-2', 'GROK_2', clean_spaces=False),
    _t('afmoe', 'AFMOE', clean_spaces=False),
    _t('laguna', 'LAGUNA', clean_spaces=False),
    _t('minimax-m2', 'MINIMAX_M2', clean_spaces=False),
    _t('solar-open', 'SOLAR_OPEN', clean_spaces=False),
    _t('mellum2', 'MELLUM2'),
):
    _PRE_TYPES[_t_.name] = _t_
del _t_

# a missing/empty tokenizer.ggml.pre means "default" (llama.cpp logs a warning)
_ALIASES = {"": "default"}


class UnknownPreTypeError(KeyError):
    """``tokenizer.ggml.pre`` value llama.cpp does not know (llama.cpp refuses to load such a file)."""

    def __str__(self) -> str:  # KeyError would repr() the message
        return str(self.args[0]) if self.args else ""


def known_pre_types() -> tuple[str, ...]:
    """All accepted ``tokenizer.ggml.pre`` strings, sorted."""
    return tuple(sorted(_PRE_TYPES))


def gguf_pre_type(pre: str | None) -> GgufPreType:
    """Pre-tokenizer description for a ``tokenizer.ggml.pre`` value (None or "" gives "default").

    Only meaningful for BPE vocabs (tokenizer.ggml.model gpt2 / hybriddna / whitespace / gemma4);
    llama.cpp ignores the pre string of llama (SPM), bert (WPM), t5 (UGM), rwkv and plamo2 vocabs.
    Raises UnknownPreTypeError (a KeyError) for anything else.
    """
    key = _ALIASES.get(pre or "", pre or "")
    try:
        return _PRE_TYPES[key]
    except KeyError:
        raise UnknownPreTypeError(
            f"unknown tokenizer.ggml.pre {pre!r}; llama.cpp knows: {', '.join(known_pre_types())}"
        ) from None
