"""Generated LongMemEval files in the exact official format (README of xiaowu0162/LongMemEval), for tests and benches.

The official data cannot be downloaded here, so tests and the M-scale bench run on files this module writes:
S-like (about 45 timestamp-sorted sessions per history), M-like (about 500) and oracle-like (the evidence sessions
only, unsorted), with all seven question types (six ``question_type`` values plus abstention, ``question_id``
ending in ``_abs``). Each instance has ``question_id``, ``question_type``, ``question``, ``answer`` (a string, or an
integer as in some official counting questions), ``question_date``, ``haystack_session_ids``, ``haystack_dates``
(``"2023/05/20 (Sat) 02:21"``), ``haystack_sessions`` (lists of ``{"role", "content"}`` turns; every turn of an
evidence session carries ``has_answer``) and ``answer_session_ids`` (evidence session ids contain ``answer``, as the
official retrieval script expects).

Filler sessions come from one pool per file and recur across instances (with each instance's own dates), as the
official ShareGPT / UltraChat fillers do; that is what lets an importer store shared sessions once. Everything is
drawn from ``random.Random(seed)``: the same arguments give the same file.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import Any, Literal

from tmem.errors import InputError
from tmem.eval.longmemeval import text as T

Kind = Literal["s", "m", "oracle"]
KINDS: tuple[Kind, ...] = ("s", "m", "oracle")
QUESTION_TYPES = (
    "single-session-user",
    "single-session-assistant",
    "single-session-preference",
    "temporal-reasoning",
    "knowledge-update",
    "multi-session",
)
ABSTENTION = "abstention"
DATE_FORMAT = "%Y/%m/%d (%a) %H:%M"
DEFAULT_SESSIONS = {"s": 45, "m": 500, "oracle": 0}

Session = list[T.Turn]


@dataclass(frozen=True)
class Case:
    """One question with its evidence: ``(day within the history, session turns)`` pairs, in time order."""

    question_type: str
    question: str
    answer: str | int
    evidence: list[tuple[int, Session]]


def _evidence(rng: random.Random, fact: str, reply: str, *, role: str = "user", at: int = 0) -> Session:
    """A chat on some topic where turn ``at`` (an even index, or odd for the assistant) states ``fact``."""
    topic = rng.choice(T.TOPICS)
    turns = T.chat_turns(rng, topic, max(4, at + 2 + rng.randrange(2) * 2), (2, 4), labelled=True)
    if role == "user":
        turns[at] = {"role": "user", "content": fact, "has_answer": True}
        turns[at + 1] = {"role": "assistant", "content": reply, "has_answer": False}
    else:
        turns[at] = {"role": "assistant", "content": fact, "has_answer": True}
    return turns


def _days(rng: random.Random, span: int, n: int) -> list[int]:
    return sorted(rng.sample(range(2, max(span - 2, n + 3)), n))


def _user_fact(rng: random.Random, span: int, abstain: bool) -> Case:
    day = _days(rng, span, 1)[0]
    which = rng.randrange(3)
    if which == 0:
        pet, name = T.pick(rng, T.PETS), T.pick(rng, T.FIRST_NAMES)
        fact = f"I finally adopted a {pet} last weekend! We named her {name} and she already runs the house."
        reply = f"Congratulations on adopting {name}! The first weeks are about routine and patience."
        if abstain:
            other = T.pick(rng, tuple(p for p in T.PETS if p != pet))
            q = f"What is the name of the {other} I adopted?"
            a = f"The information provided is not enough. You mentioned adopting a {pet} named {name}, not a {other}."
        else:
            q, a = f"What is the name of the {pet} I adopted?", name
    elif which == 1:
        city, minutes = T.pick(rng, T.CITIES), rng.randrange(20, 75)
        fact = f"My commute to the new office in {city} takes {minutes} minutes each way by train, so I need podcasts."
        reply = "A long train ride is perfect for podcasts; here are a few ideas for the trip."
        q, a = "How long is my commute to the office each way?", f"{minutes} minutes"
        if abstain:
            q = "How long is my commute to the gym each way?"
            a = f"The information provided is not enough. You mentioned your {minutes}-minute office commute, not the gym."
    else:
        thing, store = T.pick(rng, T.OBJECTS), T.pick(rng, T.STORES)
        fact = f"I bought {thing} at {store} last week and I'm still figuring out how to set it up properly."
        reply = f"Nice purchase! Setting up {thing} takes a little time, so let's go through it."
        q, a = f"Where did I buy {thing}?", store
        if abstain:
            q = "Where did I buy my new sofa?"
            a = f"The information provided is not enough. You mentioned buying {thing} at {store}, not a sofa."
    return Case("single-session-user", q, a, [(day, _evidence(rng, fact, reply, at=2 * rng.randrange(2)))])


_ORDINALS = ("first", "second", "third", "fourth", "fifth")
_KINDS = (("novels", "The {a} {b}"), ("board games", "{a} {b}s"), ("hiking trails", "the {a} {b} Trail"))
_A = ("Silent", "Copper", "Hidden", "Northern", "Paper", "Amber", "Winter", "Salt")
_B = ("Harbor", "Lantern", "Garden", "Ridge", "Orchard", "Signal", "Meadow", "Archive")


def _assistant_fact(rng: random.Random, span: int, abstain: bool) -> Case:
    del abstain  # abstention is asked of user facts, events, updates and counts (_ABSTAIN_AS), as officially
    day = _days(rng, span, 1)[0]
    kind, shape = rng.choice(_KINDS)
    names = [shape.format(a=a, b=b) for a, b in zip(rng.sample(_A, 5), rng.sample(_B, 5), strict=True)]
    listing = " ".join(f"{i + 1}. {n}." for i, n in enumerate(names))
    fact = f"Here are five {kind} I'd suggest for you: {listing} Each of them is well loved by beginners."
    turns = _evidence(rng, fact, "", role="assistant", at=1)
    turns[0] = {"role": "user", "content": f"Could you suggest a few {kind} for me to try?", "has_answer": False}
    pos = rng.randrange(5)
    q = f"In our earlier chat, what was the {_ORDINALS[pos]} of the {kind} you suggested?"
    return Case("single-session-assistant", q, names[pos], [(day, turns)])


def _preference(rng: random.Random, span: int, abstain: bool) -> Case:
    del abstain
    day = _days(rng, span, 1)[0]
    hobby, specific = rng.choice(T.HOBBIES)
    fact = f"Lately I've been really into {hobby}, especially {specific}. It's become my favourite way to unwind."
    reply = f"That sounds like a wonderful pastime; {specific} takes real skill."
    q = "I have a free weekend coming up. Can you suggest something I might enjoy doing?"
    a = (
        f"The user would prefer suggestions related to {hobby}, in particular {specific}. They might not prefer "
        "generic suggestions that ignore this interest."
    )
    return Case("single-session-preference", q, a, [(day, _evidence(rng, fact, reply))])


_EVENTS = (
    ("got back from a weekend trip to {city}", "my weekend trip to {city}"),
    ("ran my first half marathon", "my first half marathon"),
    ("started a pottery class", "starting my pottery class"),
    ("moved into my new apartment", "moving into my new apartment"),
    ("had my job interview at the design studio", "my job interview at the design studio"),
)


def _temporal(rng: random.Random, span: int, abstain: bool) -> Case:
    d1, d2 = _days(rng, span, 2)
    (e1, n1), (e2, n2) = rng.sample(_EVENTS, 2)
    city = T.pick(rng, T.CITIES)
    e1, n1, e2, n2 = (s.format(city=city) for s in (e1, n1, e2, n2))
    s1 = _evidence(rng, f"I just {e1} today, and I'm still buzzing.", "That's exciting, congratulations!")
    s2 = _evidence(rng, f"Today I finally {e2}. Big day!", "What a milestone, well done!")
    if rng.randrange(2) == 0:
        q = f"How many days passed between {n1} and {n2}?"
        a = f"{d2 - d1} days. {d2 - d1 + 1} days (including the last day) is also acceptable."
    else:
        q, a = f"Which happened first, {n2} or {n1}?", n1
    if abstain:
        q = f"How many days passed between {n1} and my dentist appointment?"
        a = f"The information provided is not enough. You mentioned {n1} and {n2}, but not a dentist appointment."
    return Case("temporal-reasoning", q, a, [(d1, s1), (d2, s2)])


_UPDATES = (
    ("My personal best in the 5K is {old}.", "I set a new personal best in the 5K: {new}!", "my 5K personal best",
     ("27:40", "26:55", "28:10"), ("25:58", "26:12", "25:31")),
    ("My sister lives in {old} these days.", "Big news: my sister just moved to {new}.", "the city my sister lives in",
     T.CITIES[:5], T.CITIES[5:]),
    ("My rent is ${old} a month right now.", "My landlord raised the rent, it's ${new} a month now.", "my monthly rent",
     ("1450", "1600", "1320"), ("1550", "1725", "1400")),
)  # fmt: skip


def _update(rng: random.Random, span: int, abstain: bool) -> Case:
    d1, d2 = _days(rng, span, 2)
    first, second, what, olds, news = rng.choice(_UPDATES)
    old, new = T.pick(rng, olds), T.pick(rng, news)
    s1 = _evidence(rng, first.format(old=old), "Thanks for sharing, good to know.")
    s2 = _evidence(rng, second.format(new=new), "That's an update worth noting!")
    q, a = f"What is {what} now?", new
    if abstain:
        q = f"What was {what} two years ago?"
        a = f"The information provided is not enough. You mentioned {old} and later {new}, nothing from two years ago."
    return Case("knowledge-update", q, a, [(d1, s1), (d2, s2)])


def _multi(rng: random.Random, span: int, abstain: bool) -> Case:
    days = _days(rng, span, 3)
    things, verb, _ = rng.choice(T.COLLECTIBLES)
    counts = [rng.randrange(1, 5) for _ in days]
    sessions = [
        (d, _evidence(rng, f"This week I {verb} {c} {things}, which felt like a lot!", "Sounds like a full week."))
        for d, c in zip(days, counts, strict=True)
    ]
    q, a = f"How many {things} have I {verb} in total across the weeks I told you about?", sum(counts)
    if abstain:
        return Case("multi-session", f"How many {things} did my brother {verb}?", (
            f"The information provided is not enough. You mentioned the {things} you {verb}, not your brother's."
        ), sessions)  # fmt: skip
    return Case("multi-session", q, a, sessions)


_BUILDERS: dict[str, Callable[[random.Random, int, bool], Case]] = {
    "single-session-user": _user_fact,
    "single-session-assistant": _assistant_fact,
    "single-session-preference": _preference,
    "temporal-reasoning": _temporal,
    "knowledge-update": _update,
    "multi-session": _multi,
}
_ABSTAIN_AS = ("single-session-user", "temporal-reasoning", "knowledge-update", "multi-session")


def _stamp(day: date, rng: random.Random) -> datetime:
    return datetime(day.year, day.month, day.day, rng.randrange(0, 24), rng.randrange(0, 60))


def generate(
    kind: Kind = "s",
    *,
    instances: int = 14,
    sessions: int | None = None,
    pool: int | None = None,
    turns: tuple[int, int] = (4, 10),
    sentences: tuple[int, int] = (3, 7),
    seed: int = 0,
    start: date = date(2023, 1, 2),
    types: Sequence[str] = (*QUESTION_TYPES, ABSTENTION),
) -> list[dict[str, Any]]:
    """``instances`` instances cycling through ``types`` (abstention becomes a ``_abs`` id on another type).

    ``sessions`` is the history length (filler plus evidence; default 45 for S, 500 for M, evidence only for oracle);
    ``pool`` the number of distinct filler sessions shared by the file (default twice ``sessions``); ``turns`` and
    ``sentences`` bound a filler session's turns and an assistant reply's sentences.
    """
    if kind not in KINDS:
        raise InputError(f"Unknown LongMemEval kind {kind!r}: use one of {', '.join(KINDS)}.")
    unknown = [t for t in types if t not in _BUILDERS and t != ABSTENTION]
    if unknown or not types:
        raise InputError(f"Unknown question types {unknown}: use {', '.join((*QUESTION_TYPES, ABSTENTION))}.")
    rng = random.Random(seed)
    length = DEFAULT_SESSIONS[kind] if sessions is None else sessions
    span = max(60, length // 2)
    fillers: list[tuple[str, Session]] = []
    if kind != "oracle":
        for n in range(pool if pool is not None else max(2 * length, 8)):
            topic = rng.choice(T.TOPICS)
            count = 2 * rng.randint(max(1, turns[0] // 2), max(1, turns[1] // 2))
            fillers.append((T.filler_id(rng, n), T.chat_turns(rng, topic, count, sentences, labelled=False)))
    out: list[dict[str, Any]] = []
    for i in range(instances):
        want = types[i % len(types)]
        abstain = want == ABSTENTION
        qtype = _ABSTAIN_AS[(i // len(types)) % len(_ABSTAIN_AS)] if abstain else want
        case = _BUILDERS[qtype](rng, span, abstain)
        qid = f"{rng.getrandbits(32):08x}" + ("_abs" if abstain else "")
        base = qid.split("_")[0]
        evidence = [(f"answer_{base}_{k + 1}", day, s) for k, (day, s) in enumerate(case.evidence)]
        chosen = rng.sample(fillers, max(0, min(len(fillers), length - len(evidence))))
        dated = [(sid, _stamp(start + timedelta(days=day), rng), s) for sid, day, s in evidence]
        dated += [(sid, _stamp(start + timedelta(days=rng.randrange(span)), rng), s) for sid, s in chosen]
        if kind == "oracle":
            rng.shuffle(dated)  # the official oracle file does not sort its evidence sessions
        else:
            dated.sort(key=lambda x: x[1])
        last = max(d for _, d, _ in dated)
        asked = _stamp((last + timedelta(days=rng.randrange(1, 15))).date(), rng)
        out.append(
            {
                "question_id": qid,
                "question_type": case.question_type,
                "question": case.question,
                "answer": case.answer,
                "question_date": asked.strftime(DATE_FORMAT),
                "haystack_session_ids": [sid for sid, _, _ in dated],
                "haystack_dates": [d.strftime(DATE_FORMAT) for _, d, _ in dated],
                "haystack_sessions": [s for _, _, s in dated],
                "answer_session_ids": [sid for sid, _, _ in evidence],
            }
        )
    return out


def write_file(path: str | Path, data: Sequence[dict[str, Any]]) -> Path:
    """Write instances as one JSON list, as the official files are."""
    target = Path(path)
    with target.open("w", encoding="utf-8") as fh:
        json.dump(list(data), fh, ensure_ascii=False)
    return target
