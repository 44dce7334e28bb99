"""Context assembly (§3.1) and the Answerer: order of the evidence, dates, persona last, token counts."""

from __future__ import annotations

from datetime import datetime

from tmem.answer import Answerer, QuestionTime, assemble_context, format_turn
from tmem.answer.answerer import answer_messages
from tmem.llm.scripted import scripted_llm
from tmem.models import Item, ItemKind, Persona, PersonaTrait, Scene, Turn
from tmem.retrieve.config import RetrievalConfig
from tmem.retrieve.types import ItemHit, Route, SceneHit, SearchResult
from tmem.scope import Scope
from tmem.store.sqlite import SQLiteStore
from tmem.util.text import count_tokens


def _turn(tid: str, when: datetime, speaker: str, text: str, caption: str | None = None) -> Turn:
    return Turn(id=tid, session_id="s", seq=0, speaker=speaker, text=text, time=when, caption=caption)


JAN29 = datetime(2023, 1, 29, 14, 32)
FEB4 = datetime(2023, 2, 4, 10, 43)
T1 = _turn("D2:1", JAN29, "Gina", "I just launched an ad campaign for my clothing store.")
T2 = _turn("D2:2", JAN29, "Jon", "That's great news!", caption="a photo of a storefront")
T3 = _turn("D4:2", FEB4, "Gina", "The store is doing great.")
LATE = Scene(
    id="s-late", seq=3, title="Store update", summary="", narrative="", turn_ids=["D4:2"], start=FEB4, end=FEB4
)
EARLY = Scene(
    id="s-early",
    seq=1,
    title="Ad campaign",
    summary="",
    narrative="",
    turn_ids=["D2:1", "D2:2"],
    start=JAN29,
    end=JAN29,
)
ITEM = Item(
    id="i1",
    text="On 29 January 2023 Gina launched an ad campaign for her clothing store.",
    kind=ItemKind.ATOMIC,
    scene_ids=["s-early"],
    date="2023-01-29",
    turn_ids=["D2:1"],
)
PERSONA = Persona(speaker="Gina", traits=[PersonaTrait(category="occupation", value="runs a clothing store")])


def _result(personas: list[Persona] | None = None) -> SearchResult:
    route = Route(name="scene.bm25", rank=1, score=3.2)
    return SearchResult(
        space="conv-30",
        query="When did Gina launch an ad campaign?",
        preset="paper",
        # ranked late-first: the context must still read chronologically
        scenes=[
            SceneHit(scene=LATE, turns=[T3], score=0.03, routes=[route]),
            SceneHit(scene=EARLY, turns=[T1, T2], score=0.02, routes=[route]),
        ],
        items=[ItemHit(item=ITEM, source_scenes=[EARLY], source_turn_ids=["D2:1"], score=0.01, routes=[route])],
        personas=personas or [],
    )


def test_context_order_dates_and_persona_last() -> None:
    ctx = assemble_context(_result([PERSONA]))
    text = ctx.text
    assert text.index("Ad campaign") < text.index("Store update") < text.index("Facts:") < text.index("occupation")
    assert "Scene (29 January 2023): Ad campaign" in text
    assert "Jon: That's great news! (shared an image: a photo of a storefront)" in text
    assert "(2023-01-29)" not in text  # the item already states its date
    assert ctx.scene_ids == ["s-late", "s-early"] and ctx.item_ids == ["i1"]
    assert ctx.turn_ids == ["D4:2", "D2:1", "D2:2"]
    assert ctx.evidence_tokens == count_tokens(ctx.evidence) and ctx.persona_tokens == count_tokens(ctx.persona)
    assert "occupation" not in ctx.evidence  # persona is outside the evidence budget
    no_persona = assemble_context(_result([PERSONA]), include_persona=False)
    assert no_persona.persona == "" and no_persona.text == no_persona.evidence


def test_empty_result_says_so() -> None:
    empty = SearchResult(space="x", query="q", preset="paper", scenes=[], items=[])
    assert assemble_context(empty).evidence == "(no memories were retrieved)"


def test_turn_format() -> None:
    assert format_turn(T1, dated=True).startswith("[29 January 2023] Gina: I just launched")


def test_prompts_state_the_question_date() -> None:
    ctx = assemble_context(_result())
    after = answer_messages("When?", ctx, QuestionTime(at=FEB4, relation="after"), "short")
    assert "after the last conversation session, which took place on 4 February 2023" in after[1].content
    assert "at most five or six words" in after[0].content
    at = answer_messages("When?", ctx, QuestionTime(at=datetime(2023, 3, 1)), "cot")
    assert "Today is 1 March 2023." in at[1].content and "step by step" in at[0].content
    assert "<memories>" in at[1].content and ctx.evidence in at[1].content


class _FixedSearch:
    """A Searcher returning one prepared result (the answerer, not retrieval, is under test)."""

    def __init__(self, result: SearchResult) -> None:
        self.result = result
        self.calls: list[tuple[str, str, RetrievalConfig | None]] = []

    def search(self, space: str, query: str, config: RetrievalConfig | None = None) -> SearchResult:
        self.calls.append((space, query, config))
        return self.result


async def test_answerer_short_and_cot_count_tokens() -> None:
    store = SQLiteStore.open(":memory:")
    llm = scripted_llm(
        store,
        replies=[
            {"answer": " 29 January 2023 "},
            {"reasoning": "The scene of 29 January 2023 holds the launch.", "answer": "29 January 2023"},
        ],
    )
    search = _FixedSearch(_result([PERSONA]))
    answerer = Answerer(search, llm)
    when = QuestionTime(at=FEB4, relation="after")
    short = await answerer.answer(Scope.local("conv-30"), "When did Gina launch an ad campaign?", when)
    assert short.answer == "29 January 2023" and short.reasoning is None and not short.cached
    assert short.tokens.evidence == short.context.evidence_tokens > 0
    assert short.tokens.persona > 0
    sent = llm.backend.requests[0].messages  # type: ignore[attr-defined]
    assert short.tokens.prompt == sum(count_tokens(m.content) for m in sent)
    assert short.tokens.llm_input == short.tokens.prompt  # the scripted backend reports count_tokens usage
    assert short.tokens.llm_output > 0
    cot = await answerer.answer(Scope.local("conv-30"), "When did Gina launch an ad campaign?", when, variant="cot")
    assert cot.reasoning and cot.answer == "29 January 2023"
    again = await answerer.answer(Scope.local("conv-30"), "When did Gina launch an ad campaign?", when)
    assert again.cached and again.tokens.llm_input == 0 and again.answer == short.answer
    assert len(search.calls) == 3


async def test_reply_names_speaker_and_listener() -> None:
    store = SQLiteStore.open(":memory:")
    llm = scripted_llm(store, replies=[{"reply": "Is the store campaign keeping you up?"}])
    answerer = Answerer(_FixedSearch(_result()), llm)
    out = await answerer.reply(
        Scope.local("conv-30"), "I can't sleep lately.", QuestionTime(at=FEB4), speaker="Gina", listener="Jon"
    )
    assert out.variant == "reply" and out.answer.startswith("Is the store")
    system, user = llm.backend.requests[0].messages  # type: ignore[attr-defined]
    # Names are conversation data: fenced in the user message, never in the system message.
    assert "Jon" not in system.content and "Gina" not in system.content
    assert "You are: <you>Jon</you>\nTalking with: <speaker>Gina</speaker>" in user.content
    assert user.content.rstrip().endswith("<message>\nI can't sleep lately.\n</message>")
