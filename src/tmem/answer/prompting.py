"""Prompt templates kept as readable text files beside their output schemas.

A template file has two sections, ``[system]`` and ``[user]``, each a :class:`string.Template` (``$name``
placeholders). Values are substituted once and never re-parsed, so conversation text containing ``$`` or braces is
safe. The evaluation judges use the same loader for their templates in :mod:`tmem.eval`.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources
from string import Template

from tmem.llm.base import Message
from tmem.util.fence import Fenced, Trusted, check_value

_SECTIONS = ("[system]", "[user]")


@dataclass(frozen=True)
class PromptTemplate:
    name: str
    system: Template
    user: Template

    def render(self, **values: str) -> list[Message]:
        """The two chat messages; a missing placeholder raises KeyError naming it (a programming error).

        Plain strings are substituted as they are (the evaluation judges use this); the answer prompts use
        :meth:`render_fenced`, which admits only fenced data and program text.
        """
        return [
            Message(role="system", content=self.system.substitute(values).strip()),
            Message(role="user", content=self.user.substitute(values).strip()),
        ]

    def render_fenced(self, **values: Fenced | Trusted | int) -> list[Message]:
        """Like :meth:`render`, but every value must be fenced data or program text (see :mod:`tmem.util.fence`),
        and no fenced value may go into the system part."""
        data = {k: check_value(k, v) for k, v in values.items()}
        for key, value in values.items():
            if isinstance(value, Fenced) and (
                f"${key}" in self.system.template or f"${{{key}}}" in self.system.template
            ):
                raise ValueError(f"{self.name}: fenced data {key!r} must not go into the system part")
        return self.render(**data)


def load_template(package: str, filename: str) -> PromptTemplate:
    """Read ``filename`` from ``package`` (e.g. ``tmem.answer``, ``short_answer.txt``)."""
    text = resources.files(package).joinpath(filename).read_text(encoding="utf-8")
    if text.count("[system]") != 1 or text.count("[user]") != 1 or text.index("[system]") > text.index("[user]"):
        raise ValueError(f"{package}/{filename}: a template needs one [system] section followed by one [user] section")
    system_part, user_part = text.split("[user]", 1)
    system_part = system_part.split("[system]", 1)[1]
    return PromptTemplate(name=filename, system=Template(system_part), user=Template(user_part))
