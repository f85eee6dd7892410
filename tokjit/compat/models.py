"""Which tiktoken encoding an OpenAI model name uses: tiktoken's routing tables (0.14), as data.

An exact name wins; otherwise the first matching prefix (dated snapshots such as
``gpt-4o-2024-05-13`` or fine-tunes ``ft:gpt-4o:...``), checked in the order below, as tiktoken does.
"""

from __future__ import annotations

from tokjit.errors import UnknownEncodingError

MODEL_PREFIX_TO_ENCODING: dict[str, str] = {
    "o1-": "o200k_base",
    "o3-": "o200k_base",
    "o4-mini-": "o200k_base",
    "gpt-5": "o200k_base",
    "gpt-4.5-": "o200k_base",
    "gpt-4.1-": "o200k_base",
    "chatgpt-4o-": "o200k_base",
    "gpt-4o-": "o200k_base",
    "gpt-4-": "cl100k_base",
    "gpt-3.5-turbo-": "cl100k_base",
    "gpt-35-turbo-": "cl100k_base",  # Azure deployment names
    "gpt-oss-": "o200k_harmony",
    "ft:gpt-4o": "o200k_base",
    "ft:gpt-4": "cl100k_base",
    "ft:gpt-3.5-turbo": "cl100k_base",
    "ft:davinci-002": "cl100k_base",
    "ft:babbage-002": "cl100k_base",
}

MODEL_TO_ENCODING: dict[str, str] = {
    "o1": "o200k_base",
    "o3": "o200k_base",
    "o4-mini": "o200k_base",
    "gpt-5": "o200k_base",
    "gpt-4.1": "o200k_base",
    "gpt-4o": "o200k_base",
    "gpt-4": "cl100k_base",
    "gpt-3.5-turbo": "cl100k_base",
    "gpt-3.5": "cl100k_base",
    "gpt-35-turbo": "cl100k_base",
    "davinci-002": "cl100k_base",
    "babbage-002": "cl100k_base",
    "text-embedding-ada-002": "cl100k_base",
    "text-embedding-3-small": "cl100k_base",
    "text-embedding-3-large": "cl100k_base",
    "text-davinci-003": "p50k_base",
    "text-davinci-002": "p50k_base",
    "text-davinci-001": "r50k_base",
    "text-curie-001": "r50k_base",
    "text-babbage-001": "r50k_base",
    "text-ada-001": "r50k_base",
    "davinci": "r50k_base",
    "curie": "r50k_base",
    "babbage": "r50k_base",
    "ada": "r50k_base",
    "code-davinci-002": "p50k_base",
    "code-davinci-001": "p50k_base",
    "code-cushman-002": "p50k_base",
    "code-cushman-001": "p50k_base",
    "davinci-codex": "p50k_base",
    "cushman-codex": "p50k_base",
    "text-davinci-edit-001": "p50k_edit",
    "code-davinci-edit-001": "p50k_edit",
    "text-similarity-davinci-001": "r50k_base",
    "text-similarity-curie-001": "r50k_base",
    "text-similarity-babbage-001": "r50k_base",
    "text-similarity-ada-001": "r50k_base",
    "text-search-davinci-doc-001": "r50k_base",
    "text-search-curie-doc-001": "r50k_base",
    "text-search-babbage-doc-001": "r50k_base",
    "text-search-ada-doc-001": "r50k_base",
    "code-search-babbage-code-001": "r50k_base",
    "code-search-ada-code-001": "r50k_base",
    "gpt2": "gpt2",
    "gpt-2": "gpt2",
}


def encoding_name_for_model(model_name: str) -> str:
    """The encoding name a model uses (``"gpt-4o"`` -> ``"o200k_base"``); ``UnknownEncodingError``
    (a ``KeyError``, as in tiktoken) for a name neither table knows."""
    name = MODEL_TO_ENCODING.get(model_name)
    if name is not None:
        return name
    for prefix, name in MODEL_PREFIX_TO_ENCODING.items():
        if model_name.startswith(prefix):
            return name
    raise UnknownEncodingError(
        f"could not map model {model_name!r} to an encoding; name one with tokjit.get_encoding(...) "
        f"(bundled: {', '.join(sorted(set(MODEL_TO_ENCODING.values()) | set(MODEL_PREFIX_TO_ENCODING.values())))})")


def encoding_for_model(model_name: str):
    """The bundled tokjit tokenizer for a model name (``tokjit.encoding_for_model("gpt-4o")``)."""
    from tokjit.api import get_encoding
    return get_encoding(encoding_name_for_model(model_name))
