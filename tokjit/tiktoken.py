"""``from tokjit import tiktoken``: tiktoken's public API, computed by tokjit (see
:mod:`tokjit.compat.tiktoken`)."""

from tokjit.compat.tiktoken import (MODEL_PREFIX_TO_ENCODING, MODEL_TO_ENCODING, Encoding, encoding_for_model,
                              encoding_name_for_model, get_encoding, list_encoding_names)

__all__ = ["Encoding", "get_encoding", "encoding_for_model", "encoding_name_for_model", "list_encoding_names",
           "MODEL_TO_ENCODING", "MODEL_PREFIX_TO_ENCODING"]
