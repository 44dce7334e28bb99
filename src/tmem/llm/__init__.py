"""The LLM layer: a structured, cached, logged interface over any OpenAI-compatible endpoint (see docs/llm.md)."""

from tmem.llm.base import LLM, ChatBackend, ChatReply, ChatRequest, LLMResult, Message, Usage
from tmem.llm.scripted import ScriptedBackend, scripted_llm
from tmem.llm.service import StructuredLLM, make_llm

__all__ = [
    "LLM",
    "ChatBackend",
    "ChatReply",
    "ChatRequest",
    "LLMResult",
    "Message",
    "ScriptedBackend",
    "StructuredLLM",
    "Usage",
    "make_llm",
    "scripted_llm",
]
