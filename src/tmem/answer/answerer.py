"""Answering a question from memory: retrieve, assemble the context, ask the QA model, count every token.

Questions are dated. A :class:`QuestionTime` says when the question is asked; the prompt states it, because
relative questions ("how long ago...") are meaningless without it. For LoCoMo the date is unknown beyond "after
the last session", so the prompt says exactly that; LoCoMo-Plus gives a query time. The machine's clock is never
used.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field

from tmem.answer.budget import pack_for
from tmem.answer.context import AnswerContext, assemble_context, format_date
from tmem.answer.prompting import PromptTemplate, load_template
from tmem.answer.schemas import CotAnswer, MemoryReply, ShortAnswer
from tmem.llm.base import LLM, Message, Usage
from tmem.retrieve.config import RetrievalConfig
from tmem.retrieve.recipe import Asked, asked
from tmem.retrieve.types import SearchResult
from tmem.scope import Scope
from tmem.util.fence import Trusted, fence, fence_inline
from tmem.util.text import count_tokens
from tmem.util.tokens import TokenCounter

Variant = Literal["short", "cot"]
STAGE_ANSWER = "answer"
STAGE_REPLY = "answer.reply"


class Searcher(Protocol):
    """What answering needs from retrieval (:class:`tmem.retrieve.Retriever` satisfies it)."""

    def search(self, space: Scope, query: str, config: RetrievalConfig | Asked | None = None) -> SearchResult: ...


class QuestionTime(BaseModel):
    model_config = ConfigDict(frozen=True)

    at: datetime = Field(description="The date the question is asked, or the last session's date (see relation).")
    relation: Literal["at", "after"] = Field(
        default="at", description="'at': asked on that date; 'after': asked some time after that date."
    )

    @classmethod
    def after_sessions(cls, starts: Iterable[datetime]) -> QuestionTime:
        """The one rule for a question without a date: asked after the latest session start (not the last session in
        list order). Raises ValueError when there is no session."""
        latest = max(starts, default=None)
        if latest is None:
            raise ValueError("no session to date the question")
        return cls(at=latest, relation="after")

    def line(self) -> str:
        if self.relation == "after":
            return (
                f"The question is asked after the last conversation session, which took place on "
                f"{format_date(self.at)}."
            )
        return f"Today is {format_date(self.at)}."


class AnswerTokens(BaseModel):
    """Answer-time tokens: the context (a budgeted one by its counter, Settings.tokenizer; an unbudgeted one by
    count_tokens), the prompt (count_tokens) and what the model reported."""

    model_config = ConfigDict(frozen=True)

    evidence: int = Field(description="Tokens of the scenes and items handed to the model.")
    persona: int = Field(description="Tokens of the persona notes appended after the evidence.")
    prompt: int = Field(description="count_tokens of the whole prompt (instructions, context, question).")
    llm_input: int = Field(description="Input tokens the LLM reported (0 when the answer came from the cache).")
    llm_output: int = Field(description="Output tokens the LLM reported (0 when cached).")


class Answer(BaseModel):
    model_config = ConfigDict(frozen=True)

    space: str
    question: str
    answer: str
    reasoning: str | None = None
    variant: str
    question_time: QuestionTime
    model: str
    cached: bool
    context: AnswerContext
    search: SearchResult
    tokens: AnswerTokens


def _template(name: str) -> PromptTemplate:
    return load_template("tmem.answer", name)


def answer_messages(question: str, context: AnswerContext, when: QuestionTime, variant: Variant) -> list[Message]:
    template = _template("short_answer.txt" if variant == "short" else "cot_answer.txt")
    return template.render_fenced(
        time_line=Trusted(when.line()),
        context=fence("memories", context.text),
        question=fence_inline("question", question),
    )


def reply_messages(
    message: str, context: AnswerContext, when: QuestionTime, *, speaker: str, listener: str
) -> list[Message]:
    template = _template("memory_reply.txt")
    return template.render_fenced(
        time_line=Trusted(when.line()),
        context=fence("memories", context.text),
        question=fence("message", message),
        speaker=fence_inline("speaker", speaker),
        listener=fence_inline("you", listener),
    )


def _tokens(context: AnswerContext, messages: list[Message], usage: Usage) -> AnswerTokens:
    return AnswerTokens(
        evidence=context.evidence_tokens,
        persona=context.persona_tokens,
        prompt=sum(count_tokens(m.content) for m in messages),
        llm_input=usage.input_tokens,
        llm_output=usage.output_tokens,
    )


class Answerer:
    """Answers questions over one store with one QA model. ``llm`` is any :class:`tmem.llm.base.LLM`."""

    def __init__(self, searcher: Searcher, llm: LLM, *, counter: TokenCounter | None = None) -> None:
        self._searcher = searcher
        self._llm = llm
        self._counter = counter  # what max_tokens counts (None: cl100k)

    def search(self, space: Scope, question: str, config: RetrievalConfig | Asked | None = None) -> SearchResult:
        return self._searcher.search(space, question, config)

    def _context(
        self,
        space: Scope,
        question: str,
        config: RetrievalConfig | Asked | None,
        result: SearchResult | None,
        max_tokens: int | None,
    ) -> tuple[SearchResult, AnswerContext]:
        """The search result and its context: every hit when ``max_tokens`` is None, else packed within it."""
        if max_tokens is None:
            found = result if result is not None else self.search(space, question, config)
            return found, assemble_context(found)
        if result is None:
            result = self.search(space, question, asked(config or RetrievalConfig.preset("auto"), None, max_tokens))
        return result, pack_for(result, max_tokens, counter=self._counter).as_answer_context()

    async def answer(
        self,
        space: Scope,
        question: str,
        when: QuestionTime,
        *,
        variant: Variant = "short",
        config: RetrievalConfig | Asked | None = None,
        result: SearchResult | None = None,
        max_tokens: int | None = None,
    ) -> Answer:
        """Retrieve (unless ``result`` is given) and answer ``question`` as asked at ``when``; with ``max_tokens`` the
        context is packed within that many tokens (:mod:`tmem.answer.budget`)."""
        found, context = self._context(space, question, config, result, max_tokens)
        messages = answer_messages(question, context, when, variant)
        reasoning: str | None = None
        if variant == "cot":
            cot = await self._llm.complete(messages, CotAnswer, stage=STAGE_ANSWER, space=space)
            text, reasoning, usage, cached = cot.output.answer, cot.output.reasoning, cot.usage, cot.cached
        else:
            short = await self._llm.complete(messages, ShortAnswer, stage=STAGE_ANSWER, space=space)
            text, usage, cached = short.output.answer, short.usage, short.cached
        return Answer(
            space=space.space,
            question=question,
            answer=text.strip(),
            reasoning=reasoning,
            variant=variant,
            question_time=when,
            model=self._llm.model,
            cached=cached,
            context=context,
            search=found,
            tokens=_tokens(context, messages, usage),
        )

    async def reply(
        self,
        space: Scope,
        message: str,
        when: QuestionTime,
        *,
        speaker: str,
        listener: str,
        config: RetrievalConfig | Asked | None = None,
        result: SearchResult | None = None,
        max_tokens: int | None = None,
    ) -> Answer:
        """A memory-aware reply to ``message`` from ``speaker`` (LoCoMo-Plus triggers)."""
        found, context = self._context(space, message, config, result, max_tokens)
        messages = reply_messages(message, context, when, speaker=speaker, listener=listener)
        out = await self._llm.complete(messages, MemoryReply, stage=STAGE_REPLY, space=space)
        return Answer(
            space=space.space,
            question=message,
            answer=out.output.reply.strip(),
            variant="reply",
            question_time=when,
            model=self._llm.model,
            cached=out.cached,
            context=context,
            search=found,
            tokens=_tokens(context, messages, out.usage),
        )
