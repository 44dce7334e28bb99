"""tmem in LangGraph (``pip install 'tmem[langgraph]'``; docs/integrations.md).

* :class:`TmemStore`: a LangGraph ``BaseStore`` over a tmem memory. A namespace is a space (its labels joined with
  ``.``, which LangGraph labels never contain); a put of a message-shaped value (``{"role", "content"}`` or
  ``{"speaker", "text"}``) adds a turn of the conversation, any other value a note turn holding its JSON, so search
  finds both; ``search`` with a query returns tmem's hits (facts, scenes, turns) as ``SearchItem`` s with their scores.
* :func:`memory_hooks`: a pre-model hook that hands the model tmem's budgeted context for the latest user message and
  a post-model hook that adds the exchange to memory, for ``create_react_agent`` (or as nodes of a graph of one's own).

Both have sync and async paths; the async ones never block the graph's loop (:mod:`tmem.integrations.core`).
"""

from __future__ import annotations

from tmem.util.extras import require_extra

require_extra("langgraph", "tmem.integrations.langgraph")

import json  # noqa: E402  (after the extra's check, as every extra's module does)
import uuid  # noqa: E402
from collections.abc import Callable, Iterable, Mapping, Sequence  # noqa: E402
from typing import Any  # noqa: E402

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage  # noqa: E402
from langchain_core.runnables import RunnableLambda  # noqa: E402
from langgraph.store.base import (  # noqa: E402
    BaseStore,
    GetOp,
    Item,
    ListNamespacesOp,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
)

from tmem.answer.budget import DEFAULT_CONTEXT_TOKENS  # noqa: E402
from tmem.errors import InputError  # noqa: E402
from tmem.integrations.core import Backend, Call, MemoryLink, Plan, context_block  # noqa: E402
from tmem.models import SpaceSummary, Turn  # noqa: E402
from tmem.retrieve.types import SearchResult  # noqa: E402

KEY, KIND = "langgraph_key", "langgraph_kind"  # the metadata of a turn a put stored
NOTE_SPEAKER = "note"
Hook = RunnableLambda[dict[str, Any], dict[str, Any]]


# ---------------------------------------------------------------------------------------------------------- values
def _message_shape(value: Mapping[str, Any]) -> tuple[str, str] | None:
    """(speaker, text) of a message-shaped value, else None."""
    for who, what in (("role", "content"), ("speaker", "text")):
        if set(value) == {who, what} and isinstance(value[who], str) and isinstance(value[what], str):
            return value[who], value[what]
    return None


def _turn_of(key: str, value: Mapping[str, Any]) -> dict[str, object]:
    """The message a put adds for ``value`` (a new id per version: a forgotten version's id is never reused)."""
    shape = _message_shape(value)
    if shape is not None:
        speaker, text, kind = *shape, "role" if "role" in value else "speaker"
    else:
        try:
            text = json.dumps(value, ensure_ascii=False)
        except (TypeError, ValueError) as exc:
            raise InputError(f"The value put under key {key!r} is not JSON ({exc}); store JSON values.") from None
        speaker, kind = NOTE_SPEAKER, "note"
    if not text.strip():
        raise InputError(f"The value put under key {key!r} is empty; store some text.")
    return {"id": f"lg-{uuid.uuid4().hex}", "speaker": speaker, "text": text, "metadata": {KEY: key, KIND: kind}}


def _value_of(turn: Turn) -> dict[str, Any]:
    """The value a stored turn was put as (a turn not put through the store reads as a message)."""
    kind = turn.metadata.get(KIND)
    if kind == "note":
        loaded: dict[str, Any] = json.loads(turn.text)
        return loaded
    if kind == "speaker":
        return {"speaker": turn.speaker, "text": turn.text}
    return {"role": turn.speaker, "content": turn.text}


def _same(turn: Turn, message: Mapping[str, object]) -> bool:
    """Whether ``turn`` holds what ``message`` (from :func:`_turn_of`) would store."""
    meta = message["metadata"]
    kind = meta.get(KIND) if isinstance(meta, dict) else None
    return (turn.speaker, turn.text, turn.metadata.get(KIND)) == (message["speaker"], message["text"], kind)


def _item(namespace: tuple[str, ...], turn: Turn, score: float | None = None) -> SearchItem:
    return SearchItem(
        namespace=namespace,
        key=str(turn.metadata.get(KEY, turn.id)),
        value=_value_of(turn),
        created_at=turn.time,
        updated_at=turn.time,
        score=score,
    )


ORDERED = ("$gt", "$gte", "$lt", "$lte")


def _comparable(value: Any, operand: Any) -> bool:
    """Whether ``value < operand`` has a meaning: two numbers (booleans are not numbers) or two strings. A stored
    value of another kind (missing, a string against a number) does not match a range; an operand of no kind that
    orders is refused (:func:`_matches`)."""
    numbers = all(isinstance(v, int | float) and not isinstance(v, bool) for v in (value, operand))
    return numbers or (isinstance(value, str) and isinstance(operand, str))


def _matches(value: Any, wanted: Any) -> bool:
    """LangGraph's filter semantics on one field: equality, or a dict of ``$eq/$ne/$gt/$gte/$lt/$lte``."""
    if isinstance(wanted, dict) and wanted and all(str(k).startswith("$") for k in wanted):
        tests: dict[str, Callable[[Any, Any], bool]] = {
            "$eq": lambda a, b: bool(a == b),
            "$ne": lambda a, b: bool(a != b),
            "$gt": lambda a, b: _comparable(a, b) and bool(a > b),
            "$gte": lambda a, b: _comparable(a, b) and bool(a >= b),
            "$lt": lambda a, b: _comparable(a, b) and bool(a < b),
            "$lte": lambda a, b: _comparable(a, b) and bool(a <= b),
        }
        unknown = set(wanted) - set(tests)
        if unknown:
            raise InputError(f"Unknown filter operator(s) {sorted(unknown)}; use {sorted(tests)}.")
        for op, operand in wanted.items():
            if op in ORDERED and not (_comparable(operand, operand) and operand == operand):  # NaN never compares
                raise InputError(f"Filter {op} {operand!r}: compare with a number or a string.")
        return all(tests[op](value, operand) for op, operand in wanted.items())
    if isinstance(wanted, dict):
        return isinstance(value, dict) and all(_matches(value.get(k), v) for k, v in wanted.items())
    return bool(value == wanted)


def _kept(value: Mapping[str, Any], filter: Mapping[str, Any] | None) -> bool:
    return not filter or all(_matches(value.get(k), v) for k, v in filter.items())


def _hits(namespace: tuple[str, ...], result: SearchResult) -> list[SearchItem]:
    """tmem's hits as SearchItems: a fact (item) as {"kind": "fact", ...}, a scene as its turns' text, a turn as the
    value it was put as (or as a message)."""
    out: list[SearchItem] = []
    for hit in result.items:
        item = hit.item
        value = {"kind": "fact", "text": item.text, "date": item.date, "turn_ids": hit.source_turn_ids}
        for scene in hit.source_scenes[-1:]:  # an item has at least one source scene; dated by its latest
            out.append(SearchItem(namespace, f"item:{item.id}", value, scene.end, scene.end, hit.score))
    for scene_hit in result.scenes:
        scene = scene_hit.scene
        text = "\n".join(f"{t.speaker}: {t.text}" for t in scene_hit.turns)
        value = {"kind": "scene", "title": scene.title, "text": text, "turn_ids": [t.id for t in scene_hit.turns]}
        out.append(SearchItem(namespace, f"scene:{scene.id}", value, scene.start, scene.end, scene_hit.score))
    out += [_item(namespace, hit.turn, hit.score) for hit in result.turns]
    return sorted(out, key=lambda i: -(i.score or 0.0))


# ---------------------------------------------------------------------------------------------------------- store
class TmemStore(BaseStore):
    """A LangGraph store whose namespaces are spaces of ``memory`` (a Memory or Client for ``batch``, any front end
    for ``abatch``)."""

    supports_ttl = False  # tmem keeps what it was told until it is forgotten (docs/integrations.md)

    def __init__(self, memory: Backend) -> None:
        self.link = MemoryLink(memory, "langgraph")

    @staticmethod
    def space_of(namespace: tuple[str, ...]) -> str:
        if not namespace or any(not label or "." in label for label in namespace):
            raise InputError(f"Bad namespace {namespace!r}: give non-empty labels without '.'.")
        return ".".join(namespace)

    # ------------------------------------------------------------------ batch: the reads and writes, sync or async
    def batch(self, ops: Iterable[Op]) -> list[Result]:
        return [self.link.drive(self._steps(op)) for op in ops]

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        return [await self.link.adrive(self._steps(op)) for op in ops]

    def _steps(self, op: Op) -> Plan[Result]:
        """One operation as the memory calls it makes (run sync or async by :meth:`MemoryLink.drive`/``adrive``)."""
        spaces: list[SpaceSummary] = yield Call("spaces", "")
        names = [s.name for s in spaces]
        if isinstance(op, ListNamespacesOp):
            return _namespaces(op, names)
        if isinstance(op, SearchOp):
            under = _under(op.namespace_prefix, names)
            if op.query:
                hits: list[SearchItem] = []
                for ns in under:
                    hits += _hits(ns, (yield Call("search", self.space_of(ns), op.query)))
                return _ranked(op, hits)
            found: list[tuple[tuple[str, ...], list[Turn]]] = []
            for ns in under:
                found.append((ns, (yield Call("turns", self.space_of(ns)))))
            return _listed(op, found)
        space = self.space_of(op.namespace)
        live: list[Turn] = (yield Call("turns", space)) if space in names else []
        result, new, old = _plan(op, live)
        if new is not None:
            yield Call("remember", space, [new])
        if old:
            yield Call("forget", space, old)
        return result


# ------------------------------------------------------------------ the pure parts, shared by both paths
Change = tuple[Result, dict[str, object] | None, list[str]]


def _plan(op: GetOp | PutOp, live: list[Turn]) -> Change:
    """What a get returns, or what a put changes: (result, the message to add or None, the turn ids to forget)."""
    current = [t for t in live if t.metadata.get(KEY) == op.key]
    if isinstance(op, GetOp):
        if not current:
            return None, None, []
        found = _item(op.namespace, current[-1])
        plain = Item(
            value=found.value,
            key=found.key,
            namespace=found.namespace,
            created_at=found.created_at,
            updated_at=found.updated_at,
        )
        return plain, None, []
    if op.ttl is not None:
        raise NotImplementedError("TmemStore keeps no TTL: tmem keeps what it was told until it is forgotten.")
    if op.value is None:  # a delete
        return None, None, [t.id for t in current]
    message = _turn_of(op.key, op.value)
    if len(current) == 1 and _same(current[0], message):
        return None, None, []  # unchanged: nothing to store
    return None, message, [t.id for t in current]


def _under(prefix: tuple[str, ...], names: Sequence[str]) -> list[tuple[str, ...]]:
    return [ns for ns in (tuple(n.split(".")) for n in names) if ns[: len(prefix)] == tuple(prefix)]


def _ranked(op: SearchOp, hits: list[SearchItem]) -> list[SearchItem]:
    kept = sorted((h for h in hits if _kept(h.value, op.filter)), key=lambda h: -(h.score or 0.0))
    return kept[op.offset : op.offset + op.limit]


def _listed(op: SearchOp, found: list[tuple[tuple[str, ...], list[Turn]]]) -> list[SearchItem]:
    """A search without a query: the values put in the namespaces, newest first, filtered."""
    items = [_item(ns, t) for ns, turns in found for t in turns if KEY in t.metadata]
    kept = [i for i in sorted(items, key=lambda i: i.updated_at, reverse=True) if _kept(i.value, op.filter)]
    return list(kept[op.offset : op.offset + op.limit])


def _namespaces(op: ListNamespacesOp, names: Sequence[str]) -> list[tuple[str, ...]]:
    found = {tuple(n.split(".")) for n in names}
    for condition in op.match_conditions or ():
        path = tuple(condition.path)
        if condition.match_type == "prefix":
            found = {ns for ns in found if len(ns) >= len(path) and _wild(ns[: len(path)], path)}
        else:
            found = {ns for ns in found if len(ns) >= len(path) and _wild(ns[len(ns) - len(path) :], path)}
    if op.max_depth is not None:
        found = {ns[: op.max_depth] for ns in found}
    return sorted(found)[op.offset : op.offset + op.limit]


def _wild(labels: tuple[str, ...], path: tuple[str, ...]) -> bool:
    return all(p in ("*", label) for label, p in zip(labels, path, strict=True))


# ---------------------------------------------------------------------------------------------------------- hooks
def _latest_user(messages: Sequence[BaseMessage]) -> HumanMessage | None:
    return next((m for m in reversed(messages) if isinstance(m, HumanMessage)), None)


def _text(message: BaseMessage) -> str:
    return str(message.text)


def _exchange(link: MemoryLink, messages: Sequence[BaseMessage]) -> list[dict[str, object]]:
    """The latest user message and the model's final reply after it (none while the model still calls tools)."""
    reply = messages[-1] if messages else None
    if not isinstance(reply, AIMessage) or reply.tool_calls or not _text(reply).strip():
        return []
    user = _latest_user(messages)
    said = [m for m in (user, reply) if m is not None and _text(m).strip()]
    out: list[dict[str, object]] = []
    for m in said:
        role = "user" if isinstance(m, HumanMessage) else "assistant"
        message: dict[str, object] = {"speaker": link.speaker(role), "text": _text(m)}
        if m.id:
            message["id"] = f"lc-{m.id}"
        out.append(message)
    return out


def memory_hooks(memory: Backend, space: str, *, max_tokens: int = DEFAULT_CONTEXT_TOKENS) -> tuple[Hook, Hook]:
    """(pre_model_hook, post_model_hook) for ``create_react_agent`` over space ``space`` of ``memory``.

    The pre-model hook puts tmem's context for the latest user message before the messages the model reads
    (``llm_input_messages``: the graph's state keeps its messages as they are); the post-model hook adds the latest
    user message and the model's final answer to memory (ids from the messages' own, so a replayed step stores
    nothing twice). Each runs sync or async as the graph is invoked."""
    link = MemoryLink(memory, space, max_tokens=max_tokens)

    def recall(state: dict[str, Any]) -> Plan[dict[str, Any]]:
        user = _latest_user(state["messages"])
        block = context_block((yield Call("recall", space, _text(user)))) if user is not None else ""
        return {"llm_input_messages": ([SystemMessage(block)] if block else []) + list(state["messages"])}

    def remember(state: dict[str, Any]) -> Plan[dict[str, Any]]:
        said = _exchange(link, state["messages"])
        if said:
            yield Call("remember", space, said)
        return {}

    def pre(state: dict[str, Any]) -> dict[str, Any]:
        return link.drive(recall(state))

    async def apre(state: dict[str, Any]) -> dict[str, Any]:
        return await link.adrive(recall(state))

    def post(state: dict[str, Any]) -> dict[str, Any]:
        return link.drive(remember(state))

    async def apost(state: dict[str, Any]) -> dict[str, Any]:
        return await link.adrive(remember(state))

    return RunnableLambda(pre, afunc=apre, name="tmem_recall"), RunnableLambda(post, afunc=apost, name="tmem_remember")
