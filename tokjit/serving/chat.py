"""Chat templates: render a conversation with the model's Jinja template, as ``transformers`` does.

The template comes from (first found): an explicit ``chat_template`` argument (template text, a
template name, or a path to a ``.jinja`` file), the tokenizer spec (GGUF ``tokenizer.chat_template``,
``tokenizer_config.json`` ``chat_template``), or a ``chat_template.jinja`` file beside the tokenizer.
Rendering uses the environment ``transformers.apply_chat_template`` builds -- sandboxed
(``ImmutableSandboxedEnvironment``), ``trim_blocks`` and ``lstrip_blocks``, the ``loopcontrols``
extension, a ``{% generation %}`` block, ``tojson`` without HTML escaping, ``raise_exception``,
``strftime_now`` -- and the same variables (special-token strings such as ``bos_token``), so the
output is the same text byte for byte.
"""

from __future__ import annotations

import json
import os
from datetime import datetime
from functools import lru_cache
from typing import Any, Mapping

from tokjit.errors import InputError

_INSTALL_HINT = "chat templates need jinja2>=3.1.6: pip install tokjit[chat]"

# the named special tokens transformers passes to templates (its SPECIAL_TOKENS_ATTRIBUTES)
NAMED_SPECIAL_TOKENS = ("bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token",
                        "mask_token")
_REASONING_FIELDS = ("reasoning_content", "thinking", "reasoning")


def _jinja():
    try:
        import jinja2
        import jinja2.ext
        import jinja2.sandbox
    except ImportError as exc:
        raise ImportError(_INSTALL_HINT) from exc
    return jinja2


@lru_cache(maxsize=64)
def compile_template(source: str):
    """Compile template text in the transformers-compatible sandbox (cached by text)."""
    jinja2 = _jinja()
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    class GenerationBlock(jinja2.ext.Extension):
        # `{% generation %}...{% endgeneration %}` marks assistant text for masks; rendering just
        # outputs the body
        tags = {"generation"}

        def parse(self, parser):
            lineno = next(parser.stream).lineno
            body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
            return jinja2.nodes.CallBlock(self.call_method("_render_body"), [], [], body).set_lineno(lineno)

        def _render_body(self, caller):
            return caller()

    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(value, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        # Jinja's own tojson escapes <, >, & and ' for HTML; chat templates want plain JSON
        return json.dumps(value, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                          sort_keys=sort_keys)

    def strftime_now(fmt):
        return datetime.now().strftime(fmt)

    class SafeDict:
        # `dict(...)` inside templates, without exposing the dict type itself
        def __call__(self, *args, **kwargs):
            return dict(*args, **kwargs)

        def fromkeys(self, *args, **kwargs):
            return dict.fromkeys(*args, **kwargs)

    class SafeNamespace(jinja2.utils.Namespace):
        # namespace attributes starting with "_" could reach interpreter internals
        def __init__(*args, **kwargs):
            self, args = args[0], args[1:]
            attrs = dict(*args, **kwargs)
            for name in attrs:
                SafeNamespace._check(name)
            jinja2.utils.Namespace.__init__(self, attrs)

        def __setitem__(self, name, value):
            SafeNamespace._check(name)
            jinja2.utils.Namespace.__setitem__(self, name, value)

        @staticmethod
        def _check(name):
            if isinstance(name, str) and name.startswith("_"):
                raise jinja2.exceptions.SecurityError(
                    f"chat templates cannot set underscore-prefixed namespace attributes ({name!r})")

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[GenerationBlock, jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    env.globals["dict"] = SafeDict()
    env.globals["namespace"] = SafeNamespace
    return env.from_string(source)


def plain_data(value: Any) -> Any:
    """Rebuild ``value`` from plain JSON-like types, so templates never see rich objects' methods."""
    if value is None or type(value) in (str, int, float, bool):
        return value
    if isinstance(value, str):
        return str.__str__(value)
    if isinstance(value, bool):
        return bool(value)
    if isinstance(value, int):
        return int.__int__(value)
    if isinstance(value, float):
        return float.__float__(value)
    if isinstance(value, Mapping):
        return {plain_data(k): plain_data(v) for k, v in value.items()}
    if isinstance(value, list):
        return [plain_data(v) for v in value]
    if isinstance(value, tuple):
        return tuple(plain_data(v) for v in value)
    item = getattr(value, "item", None)
    if callable(item) and type(value).__module__ == "numpy":
        return plain_data(item())
    import dataclasses
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: plain_data(getattr(value, f.name)) for f in dataclasses.fields(value)}
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        return plain_data(dump())
    return f"<{type(value).__name__}>"


def _alias_reasoning(messages: list[dict]) -> list[dict]:
    out = []
    for message in messages:
        reasoning = next((message[k] for k in _REASONING_FIELDS if message.get(k) is not None), None)
        if reasoning is not None:
            message = {"thinking": reasoning, **message, "reasoning_content": reasoning}
        out.append(message)
    return out


def _token_string(value) -> str | None:
    if value is None:
        return None
    if isinstance(value, dict):  # serialized AddedToken
        value = value.get("content")
    return None if value is None else str(value)


def special_token_variables(tok) -> dict[str, str]:
    """``bos_token``, ``eos_token``, ... as transformers passes them (its ``special_tokens_map``)."""
    config = getattr(tok, "config", None)
    out: dict[str, str] = {}
    if isinstance(config, dict):
        for name in NAMED_SPECIAL_TOKENS:
            s = _token_string(config.get(name))
            if s is not None:
                out[name] = s
        extra = config.get("extra_special_tokens")
        if isinstance(extra, dict):
            for name, value in extra.items():
                s = _token_string(value)
                if s is not None:
                    out[name] = s
        return out
    # no tokenizer_config.json (GGUF, bare SentencePiece): name the tokens the spec marks
    spec = tok.spec
    for name, tid in (("bos_token", spec.bos_id), ("eos_token", spec.eos_id),
                      ("unk_token", getattr(spec, "unk_id", None))):
        if tid is not None and 0 <= tid < tok.vocab_size:
            out[name] = _id_text(tok, tid)
    return out


def _id_text(tok, tid: int) -> str:
    for t in tok.spec.added_tokens:
        if t.id == tid:
            return t.content
    return tok.id_to_token(tid)


def resolve_template(tok, chat_template: str | os.PathLike | None = None, tools=None) -> str:
    """The template text to use: explicit argument, then the tokenizer's, then chat_template.jinja."""
    if isinstance(chat_template, os.PathLike):
        return _read_template_file(chat_template)
    named = _named_templates(tok)
    if chat_template is not None:
        if named and chat_template in named:
            return named[chat_template]
        if "{" not in chat_template and chat_template.endswith(".jinja") and os.path.isfile(chat_template):
            return _read_template_file(chat_template)
        return chat_template
    if named:
        if tools is not None and "tool_use" in named:
            return named["tool_use"]
        if "default" in named:
            return named["default"]
        raise InputError(f"this tokenizer has several chat templates and none named 'default'; pass "
                         f"chat_template= one of {sorted(named)}")
    template = getattr(tok.spec, "chat_template", None)
    if isinstance(template, str):
        return template
    path = tok.spec.source.get("path")
    if path:
        beside = os.path.join(os.path.dirname(os.fspath(path)), "chat_template.jinja")
        if os.path.isfile(beside):
            return _read_template_file(beside)
    raise InputError("this tokenizer has no chat template; pass chat_template= (template text or a .jinja file)")


def _named_templates(tok) -> dict[str, str] | None:
    config = getattr(tok, "config", None)
    value = config.get("chat_template") if isinstance(config, dict) else None
    if isinstance(value, dict):
        return {str(k): v for k, v in value.items()}
    if isinstance(value, list):
        return {item["name"]: item["template"] for item in value if isinstance(item, dict)}
    return None


def _read_template_file(path) -> str:
    with open(path, encoding="utf-8") as fh:
        return fh.read()


def render(tok, messages, *, add_generation_prompt: bool = False, tools=None, documents=None,
           chat_template=None, continue_final_message: bool | str = False, **kwargs) -> str:
    """The conversation rendered to text (``transformers`` ``apply_chat_template(tokenize=False)``)."""
    if not messages:
        raise InputError("cannot apply a chat template to an empty conversation")
    if continue_final_message and add_generation_prompt:
        raise InputError("continue_final_message and add_generation_prompt cannot be used together")
    source = resolve_template(tok, chat_template, tools)
    template = compile_template(source)
    if tools is not None:
        tools = [_tool_schema(t) for t in tools]
    if documents is not None:
        for d in documents:
            if not isinstance(d, dict):
                raise InputError("documents must be dicts (with 'title' and 'text' keys)")
    chat = getattr(messages, "messages", messages)
    chat = [{k: v for k, v in dict(m).items() if v is not None} if isinstance(m, Mapping) else m
            for m in chat]
    chat = plain_data(chat)
    for m in chat:
        if not isinstance(m, dict):
            raise InputError(f"chat messages must be dicts, got {m!r}")
    chat = _alias_reasoning(chat)
    variables = {**special_token_variables(tok), **kwargs}
    tag = "CONTINUE_FINAL_MESSAGE_TAG "
    final = None
    if continue_final_message:
        chat, final = _tag_final_message(chat, continue_final_message, source, tag)
    text = template.render(messages=chat, tools=plain_data(tools), documents=plain_data(documents),
                           add_generation_prompt=add_generation_prompt, **plain_data(variables))
    if continue_final_message:
        if final.strip() not in text or tag.strip() not in text:
            raise InputError("continue_final_message: the template dropped part of the final message")
        loc = text.rindex(tag.strip())
        text = text[:loc] if text[loc:loc + len(tag)] == tag else text[:loc].rstrip()
    return text


def _tag_final_message(chat, field, source, tag):
    field = field if isinstance(field, str) else "content"
    last = chat[-1]
    final = last.get(field)
    if final is None:
        raise InputError(f'continue_final_message: the final message has no "{field}"')
    fields = [field]
    if field in _REASONING_FIELDS:
        fields = [f for f in _REASONING_FIELDS if last.get(f) == final]
    if not any(f in source for f in fields):
        raise InputError(f'continue_final_message: the template never reads "{field}"')
    if isinstance(final, (list, tuple)):
        for block in reversed(final):
            if "text" in block:
                final = block["text"]
                block["text"] = block["text"] + tag
                break
        else:
            raise InputError("continue_final_message: no text block in the final message")
    else:
        for f in fields:
            last[f] = last[f] + tag
    return chat, final


def _tool_schema(tool):
    if isinstance(tool, dict):
        return tool
    try:
        from transformers.utils import get_json_schema
    except ImportError as exc:
        raise InputError("tools must be JSON-schema dicts (converting Python functions needs "
                         "transformers)") from exc
    return get_json_schema(tool)


__all__ = ["render", "resolve_template", "compile_template", "special_token_variables", "plain_data"]
