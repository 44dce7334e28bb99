"""The one exception tree of tmem.

Every error a user can meet derives from :class:`TmemError`, and every message says what to do next.

    TmemError
    ├── ConfigError          settings are missing or contradictory
    ├── InputError           a file or argument is malformed (names the file and JSON path)
    ├── NotFoundError        a space, record or file does not exist
    │   └── SpaceNotFound    a space does not exist (names only the asking tenant's spaces)
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

import re
from collections.abc import Sequence


class TmemError(Exception):
    """Base class of every error raised by tmem."""


class ConfigError(TmemError):
    """Settings are missing, invalid or contradictory."""


class InputError(TmemError):
    """Input data is malformed. The message names the file, the JSON path and what is wrong."""


class NotFoundError(TmemError):
    """A space, record or file does not exist."""


class SpaceNotFound(NotFoundError):
    """A space does not exist.

    The error carries its fields so that no front end has to rewrite its text: ``tenant`` (``""`` for the local
    tenant of plain names), ``space`` (the name within that tenant) and ``known`` (the tenant's other spaces, names
    within the tenant). The message is built from these alone, so it never names another tenant's space nor a
    tenant-prefixed store key.
    """

    def __init__(self, tenant: str, space: str, known: Sequence[str] = ()) -> None:
        self.tenant = tenant
        self.space = space
        self.known = tuple(known)
        hint = (
            f" Known spaces: {', '.join(self.known)}."
            if self.known
            else " No space exists yet: run `tmem import FILE`."
        )
        if tenant:
            hint = f" Known spaces: {', '.join(self.known)}." if self.known else " This key has no space yet."
        super().__init__(f"No space named {space!r}.{hint}")


def shown_to(message: str, tenant: str | None) -> str:
    """An error message as tenant ``tenant``'s client reads it: its own store keys ``T/S`` shown as ``S``.

    Every multi-tenant front end (HTTP service, MCP over HTTP, viewer) passes messages through this one function.
    Messages can only ever name the asking tenant's own keys (a store operation is always on one key), so removing the
    tenant's prefix is all there is to do.
    """
    if not tenant:
        return message
    # Only a whole name before the '/': tenant "a" leaves "data/x" and "data/a/" alone (names: letters, digits, . _ -).
    return re.sub(rf"(?<![A-Za-z0-9._/-]){re.escape(tenant)}/", "", message)


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


STORE_UNAVAILABLE = (
    "The memory store failed or is unavailable right now ({kind}); retry later. The cause is in the server's log "
    "(it is not shown to clients: it can name the database's host, user, name or socket)."
)


def public_message(exc: TmemError) -> str:
    """What a remote client (HTTP, MCP over HTTP, the served viewer) may read of an error: its message, except a
    store error's, whose text can show connection parameters; front ends log that one in full."""
    if isinstance(exc, StoreError):
        return STORE_UNAVAILABLE.format(kind=type(exc).__name__)
    return str(exc)
