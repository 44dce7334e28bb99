"""Answering from memory (paper §3.1): context assembly, short-answer and chain-of-thought prompts, token counts."""

from tmem.answer.answerer import Answer, Answerer, AnswerTokens, QuestionTime, Searcher, Variant
from tmem.answer.context import AnswerContext, assemble_context, format_date, format_scene, format_turn

__all__ = [
    "Answer",
    "AnswerContext",
    "AnswerTokens",
    "Answerer",
    "QuestionTime",
    "Searcher",
    "Variant",
    "assemble_context",
    "format_date",
    "format_scene",
    "format_turn",
]
