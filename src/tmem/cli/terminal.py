"""Terminal safety: text from a conversation never drives the terminal.

Names are rejected at import when they hold control characters (tmem.ingest.limits), but turn texts, model-written
summaries and memories made before that check may still hold an escape sequence (``ESC [2J`` clears the screen,
OSC sequences can set the window title or write to the clipboard). When stdout or stderr is a terminal, the console
script wraps it in :class:`SafeTerminal`, which shows every C0/C1 control character except newline and tab, and every
bidirectional override, as a visible escape (``\\x1b``) instead of sending it. Output to pipes and files is left
byte-exact (click already strips ANSI styling there, and JSON output escapes control characters itself).
"""

from __future__ import annotations

import io
import re
from typing import TextIO

_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def terminal_safe(text: str) -> str:
    """``text`` with control and bidi-override characters replaced by their visible escapes."""
    return _UNSAFE.sub(lambda m: ascii(m.group())[1:-1], text)


class SafeTerminal(io.TextIOBase):
    """A text stream that writes :func:`terminal_safe` text to the terminal stream it wraps."""

    def __init__(self, inner: TextIO) -> None:
        self._inner = inner

    def write(self, text: str) -> int:
        self._inner.write(terminal_safe(text))
        return len(text)

    def flush(self) -> None:
        self._inner.flush()

    def isatty(self) -> bool:
        return self._inner.isatty()

    def fileno(self) -> int:
        return self._inner.fileno()

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return self._inner.encoding

    @property
    def errors(self) -> str | None:  # type: ignore[override]
        return self._inner.errors


def protect(stream: TextIO) -> TextIO:
    """``stream`` wrapped in :class:`SafeTerminal` when it is a terminal, else ``stream`` itself."""
    if isinstance(stream, SafeTerminal) or not stream.isatty():
        return stream
    return SafeTerminal(stream)  # type: ignore[return-value]
