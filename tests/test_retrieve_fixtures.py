"""Shared by the retrieval tests (no tests here): a small hand-made space with every node type and trigger family,
as a scripted-LLM build would store it."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta

from tmem.embed.base import Embedder, EmbeddingResult
from tmem.embed.hashing import HashEmbedder
from tmem.models import (
    BuildMode,
    Item,
    ItemKind,
    Persona,
    PersonaTrait,
    Scene,
    Session,
    Topic,
    TopicSceneLink,
    Trigger,
    TriggerFamily,
    TriggerView,
    Turn,
)
from tmem.scope import Scope
from tmem.store.sqlite import SQLiteStore
from tmem.util.text import text_hash

SPACE = "gina-jon"
DAY0 = datetime(2023, 1, 29, 14, 0)

# scene id -> (title, summary, turn texts, topic ids)
SCENES: dict[str, tuple[str, str, list[str], list[str]]] = {
    "s1": (
        "Gina launches an ad campaign",
        "Gina starts advertising her clothing store and Jon congratulates her.",
        ["Gina: I launched the ad campaign for my clothing store today!", "Jon: Congrats, that is huge."],
        ["t_store"],
    ),
    "s2": (
        "Gina secures a wholesaler",
        "Gina found a wholesaler and shows Jon the new store interior.",
        ["Gina: A wholesaler answered, I redesigned the store interior.", "Jon: It looks amazing."],
        ["t_store"],
    ),
    "s3": (
        "Jon opens his dance studio",
        "Jon rents a space downtown for his dance studio.",
        ["Jon: I signed the lease for the dance studio downtown.", "Gina: You will make it."],
        ["t_dance"],
    ),
    "s4": (
        "Gina adopts a puppy",
        "Gina brings home a golden retriever puppy named Max.",
        ["Gina: Meet Max, my golden retriever puppy.", "Jon: He is adorable."],
        ["t_pets"],
    ),
    "s5": (
        "Gina at the doctor",
        "Gina learns she is allergic to peanuts.",
        ["Gina: The doctor says I am allergic to peanuts.", "Jon: Careful with snacks then."],
        ["t_health"],
    ),
    "s6": (
        "Jon loses his bank job",
        "Jon was laid off from the bank after ten years.",
        ["Jon: I lost my job at the bank today.", "Gina: I am so sorry, Jon."],
        ["t_work"],
    ),
}
TOPICS = {
    "t_store": "Gina's clothing store business",
    "t_dance": "Jon's dance studio",
    "t_pets": "pets and animals",
    "t_health": "health and doctor visits",
    "t_work": "employment at the bank",
}
ITEMS = [
    Item(
        id="i1",
        text="On 29 January 2023 Gina launched an ad campaign for her clothing store.",
        kind=ItemKind.ATOMIC,
        scene_ids=["s1"],
        topic_id="t_store",
        speaker="Gina",
        turn_ids=["D1:1"],
        seq=0,
    ),
    Item(
        id="i2",
        text="On 1 February 2023 Gina expanded her clothing store with a wholesaler.",
        kind=ItemKind.CONNECTED,
        scene_ids=["s1", "s2"],
        topic_id="t_store",
        speaker="Gina",
        seq=1,
    ),
    Item(
        id="i3",
        text="Jon signed a lease for a dance studio downtown.",
        kind=ItemKind.ATOMIC,
        scene_ids=["s3"],
        topic_id="t_dance",
        speaker="Jon",
        seq=2,
    ),
    Item(
        id="i4",
        text="Gina is allergic to peanuts.",
        kind=ItemKind.ATOMIC,
        scene_ids=["s5"],
        topic_id="t_health",
        speaker="Gina",
        seq=3,
    ),
    Item(
        id="i5",
        text="Gina owns a goldfish named Bubbles.",
        kind=ItemKind.ATOMIC,
        scene_ids=["s4"],
        topic_id="t_pets",
        speaker="Gina",
        superseded_by="i6",
        seq=4,
    ),
    Item(
        id="i6",
        text="Gina owns a golden retriever puppy named Max.",
        kind=ItemKind.ATOMIC,
        scene_ids=["s4"],
        topic_id="t_pets",
        speaker="Gina",
        supersedes="i5",
        seq=5,
    ),
]
# Cue texts: a query equal to a view's text has cosine 1 with it under the hash embedder.
BRIDGE_CUE = "choosing a restaurant for the team dinner"
HORIZON_CUE = "planning a career change and new income"
SCENE_CUE = "signing a commercial lease"
ENTITY_CUE = "marketing and promotion"
WEAK_BRIDGE = "choosing a gift for the team"


def _trigger(tid: str, family: TriggerFamily, host_kind: str, host: str, views: dict[str, str]) -> Trigger:
    return Trigger(
        id=tid,
        family=family,
        host_kind=host_kind,  # type: ignore[arg-type]
        host_id=host,
        views=[TriggerView(name=k, text=v) for k, v in views.items()],
    )


TRIGGERS = [
    _trigger("tr1", TriggerFamily.ENTITY, "item", "i1", {"concept": ENTITY_CUE}),
    _trigger(
        "tr2",
        TriggerFamily.BRIDGE,
        "item",
        "i4",
        {"bridge": BRIDGE_CUE, "joint": f"food allergy | {BRIDGE_CUE} | avoid peanut dishes"},
    ),
    _trigger("tr3", TriggerFamily.BRIDGE, "item", "i3", {"bridge": WEAK_BRIDGE}),
    _trigger(
        "tr4",
        TriggerFamily.SCENE,
        "scene",
        "s3",
        {"situation": SCENE_CUE, "object": "a studio space", "event": "a lease", "emotion": "hope"},
    ),
    _trigger(
        "tr5",
        TriggerFamily.HORIZON,
        "scene",
        "s6",
        {"horizon:0": HORIZON_CUE, "horizon:1": "needing emotional support after a setback"},
    ),
    _trigger("tr6", TriggerFamily.ENTITY, "item", "i5", {"concept": "pet fish"}),  # superseded host
]
PERSONA = Persona(
    speaker="Gina",
    traits=[PersonaTrait(category="occupation", value="runs a clothing store", item_ids=["i1"])],
)


class CountingEmbedder:
    """The hash embedder (or ``inner``), recording the texts it was asked to embed (to check caching)."""

    def __init__(self, dim: int = 256, inner: Embedder | None = None) -> None:
        self._inner: Embedder = inner if inner is not None else HashEmbedder(dim)
        self.texts: list[str] = []

    @property
    def model_id(self) -> str:
        return self._inner.model_id

    @property
    def dim(self) -> int:
        return self._inner.dim

    def embed(self, texts: Sequence[str]) -> EmbeddingResult:
        self.texts.extend(texts)
        return self._inner.embed(texts)


def make_store(mode: BuildMode = BuildMode.LLM) -> SQLiteStore:
    store = SQLiteStore.open(":memory:")
    store.ensure_space(Scope.local(SPACE))
    store.set_speakers(Scope.local(SPACE), ["Gina", "Jon"])
    scenes: list[Scene] = []
    seq = 0
    for n, (sid, (title, summary, texts, _topics)) in enumerate(SCENES.items()):
        start = DAY0 + timedelta(days=3 * n)
        session = Session(id=f"session_{n + 1}", seq=n, started_at=start, content_hash=text_hash(sid))
        turns = []
        for k, text in enumerate(texts):
            speaker, _, said = text.partition(": ")
            turns.append(
                Turn(
                    id=f"D{n + 1}:{k + 1}",
                    session_id=session.id,
                    seq=seq,
                    speaker=speaker,
                    text=said,
                    time=start + timedelta(minutes=k),
                )
            )
            seq += 1
        store.add_session(Scope.local(SPACE), session, turns)
        scenes.append(
            Scene(
                id=sid,
                seq=n,
                title=title,
                summary=summary,
                narrative="" if mode == BuildMode.EXTRACTIVE else summary,
                turn_ids=[t.id for t in turns],
                start=start,
                end=turns[-1].time,
                mode=mode,
            )
        )
    store.put_scenes(Scope.local(SPACE), scenes)
    store.put_topics(
        Scope.local(SPACE), [Topic(id=tid, seq=n, label=label) for n, (tid, label) in enumerate(TOPICS.items())]
    )
    store.link_topics(
        Scope.local(SPACE),
        [TopicSceneLink(topic_id=t, scene_id=sid) for sid, (*_, topics) in SCENES.items() for t in topics],
    )
    store.put_items(Scope.local(SPACE), [i.model_copy(update={"mode": mode}) for i in ITEMS])
    if mode == BuildMode.EXTRACTIVE:
        store.put_triggers(Scope.local(SPACE), [t for t in TRIGGERS if t.family == TriggerFamily.ENTITY])
    else:
        store.put_triggers(Scope.local(SPACE), TRIGGERS)
        store.put_persona(Scope.local(SPACE), PERSONA)
    store.set_state(Scope.local(SPACE), "build.mode", mode.value)
    store.set_state(Scope.local(SPACE), "build.sessions", str(len(SCENES)))
    return store
