"""The one exception tree of tmem.

Every error a user can meet derives from :class:`TmemError`, and every message says what to do next.

    TmemError
    ├── ConfigError          settings are missing or contradictory
    ├── InputError           a file or argument is malformed (names the file and JSON path)
    ├── NotFoundError        a space, record or file does not exist
    ├── StoreError           the memory directory cannot be read or written
    │   └── IntegrityError   the memory violates an invariant (``tmem check``)
    ├── LLMError             the language model could not produce a usable answer
    │   ├── LLMTransientError  rate limits, 5xx, timeouts, dropped connections (retried, then raised)
    │   └── LLMOutputError     the model's output failed validation after repair and retries
    ├── BatchPending         not a failure: a control-flow signal (requests were written for the batch protocol;
    │                        import results and rerun); deliberately outside LLMError, so retry-on-LLMError code
    │                        never swallows it
    ├── EmbeddingError       the embedding model could not be loaded or called
    └── BuildError           a construction stage failed (wraps the cause)
"""

from __future__ import annotations


class TmemError(Exception):
    """Base class of every error raised by tmem."""


class ConfigError(TmemError):
    """Settings are missing, invalid or contradictory."""


class InputError(TmemError):
    """Input data is malformed. The message names the file, the JSON path and what is wrong."""


class NotFoundError(TmemError):
    """A space, record or file does not exist."""


class StoreError(TmemError):
    """The memory store cannot be opened, read or written."""


class IntegrityError(StoreError):
    """The stored memory violates one of its invariants."""


class LLMError(TmemError):
    """The language model could not produce a usable answer."""


class LLMTransientError(LLMError):
    """A transient failure (429, 5xx, timeout, dropped connection) that outlived its retries."""


class LLMOutputError(LLMError):
    """The model's structured output stayed invalid after repair and bounded retries."""


class BatchPending(TmemError):
    """A build stopped because requests are not cached yet and were written for the batch protocol.

    A control-flow signal, not a failure: it does not derive from :class:`LLMError`, so code that handles or retries
    LLM failures lets it through to the build, which exports the pending requests.

    Attributes:
        path: the JSONL file the requests were written to (None when only counted).
        count: how many requests are pending.
        stage: the first construction stage whose requests are uncached.
    """

    def __init__(self, message: str, *, count: int, stage: str, path: str | None = None) -> None:
        super().__init__(message)
        self.count = count
        self.stage = stage
        self.path = path


class EmbeddingError(TmemError):
    """The embedding model could not be loaded or called."""


class BuildError(TmemError):
    """A construction stage failed."""


class BuildBusy(BuildError):
    """Another build of the same space is running (it holds the space's build lease)."""
