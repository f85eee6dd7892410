"""``tokjit.load`` given the wrong thing says what it was given and what to pass instead, in a short
typed error (issue 16)."""

from __future__ import annotations

import pytest

import tokjit


def test_file_contents_instead_of_a_path(shared):
    path = shared / "data/hf/llama3/tokenizer.json"
    for contents in (path.read_text(encoding="utf-8"), path.read_bytes()):
        with pytest.raises(tokjit.InputError) as info:
            tokjit.load(contents)
        message = str(info.value)
        assert len(message) < 400 and "file contents" in message and "load_bytes" in message
    # the pointed-to helper does load them, to the same ids as the file
    from tokjit.api import load_bytes
    text = "Hello world, it's me"
    assert load_bytes(path.read_bytes()).encode(text) == tokjit.load(path).encode(text)


def test_tokenizer_config_json_is_named(shared):
    config = shared / "data/hf/llama3/tokenizer_config.json"
    with pytest.raises(tokjit.ModelFileError) as info:
        tokjit.load(config)
    assert "tokenizer_config.json" in str(info.value) and "not a tokenizer" in str(info.value)


def test_tokenizer_config_json_recognised_by_content(shared, tmp_path):
    renamed = tmp_path / "settings.json"
    renamed.write_bytes((shared / "data/hf/llama3/tokenizer_config.json").read_bytes())
    with pytest.raises(tokjit.ModelFileError, match="tokenizer_config.json"):
        tokjit.load(renamed)
    other = tmp_path / "other.json"
    other.write_text('{"vocab_size": 10}', encoding="utf-8")
    with pytest.raises(tokjit.ModelFileError, match='without a "model" section'):
        tokjit.load(other)


def test_hub_id_says_load_reads_local_files(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(tokjit.TokenizerFileNotFoundError) as info:
        tokjit.load("meta-llama/Llama-3.1-8B")
    message = str(info.value)
    assert "Hugging Face Hub id" in message and "local files" in message and "huggingface-cli download" in message
    for missing in ("missing.json", "folder/tokenizer.json"):
        with pytest.raises(tokjit.TokenizerFileNotFoundError) as info:
            tokjit.load(missing)
        assert "Hub" not in str(info.value)
