"""The one exception tree of tmem.

Every error a user can meet derives from :class:`TmemError`, and every message says what to do next.

Errors carry structured fields beside their message (:attr:`TmemError.fields`). A message raised with fields is a
template of them (``str.format``), so a front end renders it for its reader from the fields
(:meth:`TmemError.shown_to`): a tenant reads its spaces by their own names, and a space of another tenant is never
named. No front end edits a message's text after it was raised.

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

from collections.abc import Iterator, Sequence
from typing import ClassVar, Protocol, runtime_checkable

SPACE_FIELDS = frozenset({"space"})  # fields holding a space: its name when a ``tenant`` field is beside it, else a
# store key ("T/S" on a server, "S" locally)
WITHHELD = "(a space of another key)"  # how a space of another tenant would be rendered (never expected)


def space_for(key: str, tenant: str | None) -> str:
    """How tenant ``tenant``'s reader sees the store space key ``key``: its own name (``S`` for ``T/S``), the key as
    is for the local user (no tenant), never another tenant's key."""
    if not tenant:
        return key
    head, sep, name = key.partition("/")
    return name if sep and head == tenant else WITHHELD


@runtime_checkable
class Scoped(Protocol):
    """A tenant's space (:class:`tmem.scope.Scope`, which imports this module): a ``space`` field given as one is
    kept as its two fields, ``tenant`` and the space's name."""

    tenant: str
    space: str


def _rendered(fields: dict[str, object], reader: str | None) -> dict[str, object]:
    """``fields`` as reader ``reader`` (a tenant, or None for the local user) reads them: a space of the reader's
    tenant by its name, of another tenant never; the local user reads a tenant's space as ``T/S``."""
    owner = fields.get("tenant")
    out = dict(fields)
    for k in SPACE_FIELDS & fields.keys():
        value = fields[k]
        if not isinstance(value, str):
            continue
        if not isinstance(owner, str):  # a store key of no stated tenant
            out[k] = space_for(value, reader)
        elif not reader:
            out[k] = f"{owner}/{value}" if owner else value
        else:
            out[k] = value if reader == owner else WITHHELD
    return out


class TmemError(Exception):
    """Base class of every error raised by tmem.

    ``TmemError(message)`` is a plain message. ``TmemError(template, **fields)`` renders ``template.format(**fields)``
    (for the local user) and keeps both: :meth:`shown_to` renders it again for a tenant's reader. A space is raised
    as the fields of its scope (``**scope.fields``: ``tenant`` and the space's name ``space``) and shown by its name to
    its tenant, never to another; a ``space`` field without a ``tenant`` beside it is a store key (``T/S``), shown as
    ``S`` to tenant T. ``agent=TEMPLATE`` (not a field) is the same message for an agent calling tools, where the
    message advises a command to run: :meth:`for_agent`.
    """

    # How the HTTP service answers the error (RFC 9457 problem details): its status and the slug of its problem type
    # (``urn:tmem:problem:SLUG``); a subclass that declares neither answers as its base. ``problem_aliases``: other
    # slugs the service answers for this class (its own problems, raised by the service itself), ``status_aliases``:
    # other statuses meaning it. The service (tmem.service.problems) and the client (tmem.client.plans) both read
    # these, through :func:`problem_classes` and :func:`status_classes`.
    status: ClassVar[int] = 500
    problem: ClassVar[str] = "internal"
    problem_aliases: ClassVar[tuple[str, ...]] = ()
    status_aliases: ClassVar[tuple[int, ...]] = ()

    def __init__(self, message: str = "", /, **fields: object) -> None:
        agent = fields.pop("agent", None)  # not a field: the message for an agent (below)
        scoped = fields.get("space")
        if isinstance(scoped, Scoped):
            fields = {**fields, "tenant": scoped.tenant, "space": scoped.space}
        self.template = message
        self.agent_template = agent if isinstance(agent, str) else None  # for an agent: advice it can follow
        self.fields: dict[str, object] = fields
        super().__init__(message.format(**_rendered(fields, None)) if fields else message)

    def shown_to(self, tenant: str | None) -> str:
        """The message as tenant ``tenant``'s reader reads it (``None``: the local user, who reads it as raised)."""
        if not tenant or not self.fields:
            return str(self)
        return self.template.format(**_rendered(self.fields, tenant))

    def for_agent(self, tenant: str | None) -> str:
        """The message as an agent calling tools (MCP) reads it: where the message advises a command (`tmem ...`)
        the error was raised with an ``agent`` template of the same fields that names what a tool caller can do
        instead; otherwise as :meth:`shown_to`."""
        if self.agent_template is None:
            return self.shown_to(tenant)
        return self.agent_template.format(**_rendered(self.fields, tenant or None))


class ConfigError(TmemError):
    """Settings are missing, invalid or contradictory."""

    status = 400
    problem = "invalid-config"
    problem_aliases = ("llm-not-configured", "unauthorized")
    status_aliases = (401,)


class InputError(TmemError):
    """Input data is malformed. The message names the file, the JSON path and what is wrong."""

    status = 422
    problem = "invalid-input"
    problem_aliases = ("invalid-request",)
    status_aliases = (413,)


class NotFoundError(TmemError):
    """A space, record or file does not exist.

    Raised with fields where they are known: ``kind`` (what is missing: "item", "turn", "space", "job", "file"...),
    ``name`` (its name or id), ``space`` (the store key of the space it was looked for in) and a ``hint``.
    """

    status = 404
    problem = "not-found"
    problem_aliases = ("not-built",)

    @property
    def kind(self) -> str | None:
        kind = self.fields.get("kind")
        return kind if isinstance(kind, str) else None

    @property
    def name(self) -> str | None:
        name = self.fields.get("name")
        return name if isinstance(name, str) else None


class SpaceNotFound(NotFoundError):
    """A space does not exist.

    Fields: ``tenant`` (``""`` for the local tenant of plain names), ``name`` (the space's name within that tenant)
    and ``known`` (the tenant's other spaces, names within the tenant). The message is built from these alone, so it
    never names another tenant's space nor a tenant-prefixed store key; :meth:`shown_to` lists the known spaces only
    to a reader of the same tenant.
    """

    def __init__(self, tenant: str, space: str, known: Sequence[str] = ()) -> None:
        self.tenant = tenant
        self.space = space
        self.known = tuple(known)
        if self.known:
            hint = agent_hint = f"Known spaces: {', '.join(self.known)}."
        else:
            hint = "This key has no space yet." if tenant else "No space exists yet: run `tmem import FILE`."
            agent_hint = "No space exists yet: the remember tool creates one with the messages it stores."
        super().__init__(
            "No space named {name!r}. {hint}",
            agent="No space named {name!r}. {agent_hint}",
            kind="space",
            name=space,
            tenant=tenant,
            hint=hint,
            agent_hint=agent_hint,
        )

    def shown_to(self, tenant: str | None) -> str:
        if tenant is not None and tenant != self.tenant:  # never expected: front ends ask for their tenant's keys
            return "No such space for this key."  # names nothing of another tenant
        return str(self)

    def for_agent(self, tenant: str | None) -> str:
        if tenant is not None and tenant != self.tenant:
            return "No such space for this key."
        return super().for_agent(tenant)


class StoreError(TmemError):
    """The memory store cannot be opened, read or written."""

    status = 503
    problem = "store-unavailable"


class IntegrityError(StoreError):
    """The stored memory violates one of its invariants."""

    status = 500
    problem = "integrity"


class LLMError(TmemError):
    """The language model could not produce a usable answer."""

    status = 502
    problem = "llm-failed"


class LLMTransientError(LLMError):
    """A transient failure (429, 5xx, timeout, dropped connection) that outlived its retries."""

    status = 503
    problem = "llm-unavailable"


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

    status = 503
    problem = "embedder-unavailable"


class BuildError(TmemError):
    """A construction stage failed."""

    status = 409
    problem = "build-conflict"


class BuildBusy(BuildError):
    """Another build of the same space is running (it holds the space's build lease)."""

    problem_aliases = ("build-running",)


def _tree(cls: type[TmemError] = TmemError) -> Iterator[type[TmemError]]:
    yield cls
    for sub in cls.__subclasses__():
        yield from _tree(sub)


def problem_classes() -> dict[str, type[TmemError]]:
    """Each problem slug the HTTP service answers with, and the error class it stands for (what a client raises):
    the slug each class declares, and its aliases."""
    out: dict[str, type[TmemError]] = {}
    for cls in _tree():
        if cls is TmemError:  # "internal": a server's bug, read as a store error (see tmem.client.plans.error_of)
            continue
        own = vars(cls)
        slugs = ([own["problem"]] if "problem" in own else []) + list(own.get("problem_aliases", ()))
        out.update(dict.fromkeys(slugs, cls))
    return out


def status_classes() -> dict[int, type[TmemError]]:
    """Each client-error status (4xx) and the error class it stands for, when a problem names no known slug."""
    out: dict[int, type[TmemError]] = {}
    for cls in _tree():
        own = vars(cls)
        if "status" in own and 400 <= cls.status < 500:
            out.setdefault(cls.status, cls)
        out.update(dict.fromkeys(own.get("status_aliases", ()), cls))
    return out


STORE_UNAVAILABLE = (
    "The memory store failed or is unavailable right now ({kind}); retry later. The cause is in the server's log "
    "(it is not shown to clients: it can name the database's host, user, name or socket)."
)


def public_message(exc: TmemError, tenant: str | None = None) -> str:
    """What a remote client (HTTP, MCP over HTTP, the served viewer) of tenant ``tenant`` may read of an error: its
    message rendered from its fields for that tenant, except a store error's, whose text can show connection
    parameters; front ends log that one in full."""
    if isinstance(exc, StoreError):
        return STORE_UNAVAILABLE.format(kind=type(exc).__name__)
    return exc.shown_to(tenant)
