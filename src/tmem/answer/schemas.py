"""Output schemas of the answer prompts; each template sits beside this module:

- ``short_answer.txt`` -> :class:`ShortAnswer` (LoCoMo's official style: a short phrase of a few words),
- ``cot_answer.txt`` -> :class:`CotAnswer` (reason step by step over the memories, then a short answer),
- ``memory_reply.txt`` -> :class:`MemoryReply` (LoCoMo-Plus: reply to a message as an assistant who remembers).
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class ShortAnswer(BaseModel):
    model_config = ConfigDict(extra="ignore")

    answer: str = Field(description="The answer as a short phrase of at most six words, taken from the memories.")


class CotAnswer(BaseModel):
    model_config = ConfigDict(extra="ignore")

    reasoning: str = Field(
        description="Step by step: the relevant memories, their dates, any date arithmetic, the conclusion."
    )
    answer: str = Field(description="The final answer as a short phrase of at most six words.")


class MemoryReply(BaseModel):
    model_config = ConfigDict(extra="ignore")

    reply: str = Field(description="The reply to the user's message, in two or three sentences.")
