"""Chat templates rendered by tokjit equal ``transformers`` ``apply_chat_template(tokenize=False)``
byte for byte: the templates of the tokenizer_config.json files in the shared data, and templates
written here to exercise tools, ``tojson``, namespaces, loop controls and the ``generation`` block."""

from __future__ import annotations

import json

import pytest

import tokjit

pytest.importorskip("jinja2")
transformers = pytest.importorskip("transformers")

CONVERSATIONS = [
    [{"role": "user", "content": "Hello!"}],
    [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "  2+2?  "}],
    [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello, how can I help?"},
     {"role": "user", "content": "Tell me a joke about 中文 and emoji 🎉."}],
    [{"role": "system", "content": "Be nice.\nAlways."}, {"role": "user", "content": "<b>bold</b> & 'quotes'"},
     {"role": "assistant", "content": "Sure: \"ok\""}, {"role": "user", "content": "again"},
     {"role": "assistant", "content": "again!"}],
    [{"role": "user", "content": [{"type": "text", "text": "Describe "}, {"type": "image"},
                                  {"type": "text", "text": " please"}]}],
    [{"role": "user", "content": "x", "name": None}],
]

TOOLS = [{"type": "function", "function": {
    "name": "get_weather", "description": "Weather for a city <now>",
    "parameters": {"type": "object", "properties": {"city": {"type": "string", "description": "Name"}},
                   "required": ["city"]}}}]

TOOL_CONVERSATION = [
    {"role": "system", "content": "You can call tools."},
    {"role": "user", "content": "Weather in Zürich?"},
    {"role": "assistant", "content": None, "tool_calls": [
        {"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Zürich"}}}]},
    {"role": "tool", "name": "get_weather", "content": "{\"temp\": 21}"},
    {"role": "assistant", "content": "It is 21°C.", "reasoning_content": "looked it up"},
]

# Templates written for these tests (formats in the style of current chat models).
TOOL_TEMPLATE = (
    "{{- bos_token }}\n"
    "{%- set ns = namespace(sys='', first=true) %}\n"
    "{%- if messages[0]['role'] == 'system' %}{% set ns.sys = messages[0]['content'] %}"
    "{% set messages = messages[1:] %}{% endif %}\n"
    "{%- if tools %}\n<|system|>\n{{ ns.sys }}\nTools:\n{% for t in tools %}"
    "{{ t | tojson(indent=2) }}\n{% endfor %}<|end|>\n"
    "{%- elif ns.sys %}\n<|system|>\n{{ ns.sys }}<|end|>\n{%- endif %}\n"
    "{%- for m in messages %}\n"
    "  {%- if m['role'] == 'tool' %}<|tool|>{{ m['name'] }}: {{ m['content'] }}<|end|>\n"
    "  {%- continue %}{% endif %}\n"
    "  <|{{ m['role'] }}|>\n"
    "  {%- if m.reasoning_content is defined %}<think>{{ m.reasoning_content }}</think>{% endif %}\n"
    "  {%- if m['content'] is defined %}{% generation %}{{ m['content'] }}{% endgeneration %}{% endif %}\n"
    "  {%- for call in m.get('tool_calls', []) %}<call>{{ call.function | tojson }}</call>"
    "{% if loop.index > 3 %}{% break %}{% endif %}{% endfor %}\n"
    "<|end|>\n"
    "{%- endfor %}\n"
    "{%- if add_generation_prompt %}<|assistant|>\n{% endif %}"
)

KWARGS_TEMPLATE = (
    "{% for m in messages %}[{{ m.role | upper }}] {{ m.content }}{{ eos_token }}\n{% endfor %}"
    "{% if custom %}{{ custom | tojson(sort_keys=true, separators=(',', ':')) }}{% endif %}"
    "{{ dict(a=1) | tojson }}{{ strftime_now('%Y') }}"
)

RAISING_TEMPLATE = "{% if messages[0].role != 'user' %}{{ raise_exception('first must be user') }}{% endif %}ok"


def _hf(shared, name):
    folder = shared / "data" / "hf" / name
    config = json.loads((folder / "tokenizer_config.json").read_text(encoding="utf-8"))
    config.pop("added_tokens_decoder", None)
    ref = transformers.PreTrainedTokenizerFast(tokenizer_file=str(folder / "tokenizer.json"), **config)
    return tokjit.load(folder / "tokenizer.json"), ref


def _both(tok, ref, messages, **kw):
    try:
        want = ref.apply_chat_template(messages, tokenize=False, **kw)
    except Exception as exc:  # the template raised: tokjit must raise too
        with pytest.raises(Exception):
            tok.apply_chat_template(messages, **kw)
        return type(exc)
    got = tok.apply_chat_template(messages, **kw)
    assert got == want, (messages, kw)
    return want


@pytest.mark.parametrize("name", ["llama3", "gemma3"])
def test_config_templates(shared, name):
    tok, ref = _hf(shared, name)
    assert tok.spec.chat_template == ref.chat_template
    rendered = 0
    for messages in CONVERSATIONS + [TOOL_CONVERSATION]:
        for gen in (False, True):
            out = _both(tok, ref, messages, add_generation_prompt=gen)
            rendered += isinstance(out, str)
        _both(tok, ref, messages, tools=TOOLS)
    assert rendered >= 6


@pytest.mark.parametrize("name", ["llama3", "gemma3"])
def test_written_templates(shared, name):
    tok, ref = _hf(shared, name)
    for template in (TOOL_TEMPLATE, KWARGS_TEMPLATE, RAISING_TEMPLATE):
        for messages in CONVERSATIONS + [TOOL_CONVERSATION]:
            for gen in (False, True):
                _both(tok, ref, messages, add_generation_prompt=gen, chat_template=template, tools=TOOLS)
                _both(tok, ref, messages, add_generation_prompt=gen, chat_template=template)
        _both(tok, ref, CONVERSATIONS[2], chat_template=template, custom={"b": [1, "é"], "a": None})


def test_continue_final_message(shared):
    tok, ref = _hf(shared, "llama3")
    messages = CONVERSATIONS[2] + [{"role": "assistant", "content": "Why did the "}]
    _both(tok, ref, messages, continue_final_message=True, chat_template=TOOL_TEMPLATE)
    _both(tok, ref, messages, continue_final_message=True)


def test_tokenize_and_jinja_file(shared, tmp_path):
    tok, ref = _hf(shared, "llama3")
    ids = tok.apply_chat_template(CONVERSATIONS[1], add_generation_prompt=True, tokenize=True)
    assert ids == ref.apply_chat_template(CONVERSATIONS[1], add_generation_prompt=True, tokenize=True,
                                          return_dict=False)
    path = tmp_path / "template.jinja"
    path.write_text(TOOL_TEMPLATE, encoding="utf-8")
    assert tok.apply_chat_template(CONVERSATIONS[2], chat_template=str(path)) == \
        ref.apply_chat_template(CONVERSATIONS[2], chat_template=TOOL_TEMPLATE, tokenize=False)


def test_no_template_is_a_clear_error(shared):
    tok = tokjit.load(shared / "data" / "hf" / "gpt4o" / "tokenizer.json")
    with pytest.raises(tokjit.InputError, match="no chat template"):
        tok.apply_chat_template(CONVERSATIONS[0])


def test_sandbox_blocks_attribute_escape(shared):
    tok = tokjit.load(shared / "data" / "hf" / "llama3" / "tokenizer.json")
    import jinja2
    evil = "{{ messages.__class__.__mro__ }}"
    with pytest.raises(jinja2.exceptions.SecurityError):
        tok.apply_chat_template(CONVERSATIONS[0], chat_template=evil + "{{ ''.__class__.__subclasses__() }}")


def test_missing_jinja_message(monkeypatch):
    import builtins

    from tokjit.serving import chat
    real_import = builtins.__import__

    def fake_import(name, *args, **kwargs):
        if name.startswith("jinja2"):
            raise ImportError("no jinja2")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", fake_import)
    chat.compile_template.cache_clear()
    with pytest.raises(ImportError, match=r"pip install tokjit\[chat\]"):
        chat.compile_template("{{ 1 }}")
    monkeypatch.undo()
    chat.compile_template.cache_clear()
