"""Schema-valid, plausible replies to tmem's construction prompts, computed from the request content.

This is test scaffolding, never a statement about model quality: it lets a full LLM-mode build run offline (through
the scripted backend or the OpenAI-compatible stub server) and is *local* by design — every decision depends only on
the turns / scenes / items it is shown, never on where a buffer or batch starts — so that an incremental build and a
build of everything at once must end with the same memory.

    from tests.support.stage_replies import scripted_reply, stub_reply
    llm = scripted_llm(store, fn=scripted_reply)                  # ScriptedBackend
    OpenAIStub(reply=stub_reply, faults=[...])                    # HTTP stub server

Segmentation rule: turns of a session form chunks of ``CHUNK`` turns counted from the session's first turn (turn ids
``D<session>:<n>``); a scene ends with its chunk, except that a session's last chunk shorter than ``SHORT`` turns runs
on into the next session (a scene spanning a break), and no scene exceeds ``min(CAP, max_scene_turns)`` counted from
the scene's first turn (buffers always start at a scene start, so this stays local).
"""

from __future__ import annotations

import itertools
import json
import re
from collections import Counter
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from tmem.construct.options import BuildOptions
from tmem.llm.base import ChatRequest
from tmem.scope import Scope

# Build options with small windows: buffers are cut mid-session, so scene starts and the provisional tail are
# exercised often (the incremental-build property and the incremental index tests).
SMALL_WINDOWS = BuildOptions(
    segment_window=9,
    max_scene_turns=9,
    topic_scenes_per_call=3,
    item_scenes_per_call=2,
    items_per_trigger_call=7,
    scenes_per_trigger_call=3,
)
CHUNK = 8
SHORT = 3
CAP = 12

_STOP = set(
    [
        "about",
        "above",
        "after",
        "again",
        "against",
        "all",
        "also",
        "always",
        "and",
        "another",
        "any",
        "anything",
        "are",
        "around",
        "because",
        "been",
        "before",
        "being",
        "below",
        "between",
        "both",
        "but",
        "can",
        "cannot",
        "could",
        "did",
        "does",
        "doing",
        "down",
        "during",
        "each",
        "even",
        "ever",
        "every",
        "few",
        "first",
        "for",
        "from",
        "further",
        "going",
        "gonna",
        "good",
        "great",
        "had",
        "has",
        "have",
        "having",
        "here",
        "hers",
        "herself",
        "him",
        "himself",
        "his",
        "how",
        "into",
        "its",
        "itself",
        "just",
        "know",
        "like",
        "lot",
        "made",
        "make",
        "many",
        "more",
        "most",
        "much",
        "must",
        "myself",
        "never",
        "new",
        "next",
        "now",
        "off",
        "once",
        "only",
        "other",
        "ought",
        "our",
        "ours",
        "ourselves",
        "out",
        "over",
        "own",
        "pretty",
        "really",
        "right",
        "said",
        "same",
        "say",
        "see",
        "she",
        "should",
        "some",
        "something",
        "still",
        "such",
        "sure",
        "take",
        "than",
        "thank",
        "thanks",
        "that",
        "the",
        "their",
        "theirs",
        "them",
        "themselves",
        "then",
        "there",
        "these",
        "they",
        "thing",
        "things",
        "think",
        "this",
        "those",
        "though",
        "through",
        "time",
        "too",
        "totally",
        "under",
        "until",
        "very",
        "want",
        "was",
        "way",
        "well",
        "were",
        "what",
        "when",
        "where",
        "which",
        "while",
        "who",
        "whom",
        "why",
        "will",
        "with",
        "would",
        "wow",
        "yeah",
        "yes",
        "you",
        "your",
        "yours",
        "yourself",
        "yourselves",
        "awesome",
        "amazing",
        "cool",
        "glad",
        "love",
        "hey",
        "hope",
        "looks",
        "sounds",
        "told",
        "talk",
        "talked",
    ]
)
_WORD = re.compile(r"[A-Za-z][A-Za-z'-]+")
_TURN = re.compile(
    r"^\[(?P<id>[^\]]+)\] (?P<date>\d{1,2} \w+ \d{4}), (?P<hm>\d\d:\d\d) · (?P<speaker>[^:]+): (?P<text>.*)$"
)
_SESSION = re.compile(r"^--- (?P<session>\S+) \(from .*\) ---$")


@dataclass
class _Turn:
    id: str
    session: str
    date: str  # '8 May 2023'
    speaker: str
    text: str

    @property
    def pos(self) -> int:
        return int(self.id.rsplit(":", 1)[1]) if ":" in self.id and self.id.rsplit(":", 1)[1].isdigit() else 0


def keywords(text: str, k: int = 3) -> list[str]:
    words = [w.lower().strip("'-") for w in _WORD.findall(text)]
    counts = Counter(w for w in words if len(w) >= 5 and w not in _STOP)
    return [w for w, _ in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:k]]


def iso(date_text: str) -> str:
    return datetime.strptime(date_text.strip(), "%d %B %Y").strftime("%Y-%m-%d")


def when(text: str, date_text: str) -> str:
    """The item date with the precision the turn states, resolved by the written convention against the turn's day
    (tmem.util.dates.DATE_CONVENTION): a week, weekend, month or year for "last week/weekend/month/year"."""
    from datetime import timedelta

    day = datetime.strptime(date_text.strip(), "%d %B %Y").date()
    low = text.lower()
    if "last weekend" in low:
        saturday = day - timedelta(days=day.weekday() + 2)
        return f"{saturday.isoformat()}/{(saturday + timedelta(days=1)).isoformat()}"
    if "last week" in low:
        year, week, _ = (day - timedelta(days=7)).isocalendar()
        return f"{year}-W{week:02d}"
    if "last month" in low:
        first = day.replace(day=1) - timedelta(days=1)
        return f"{first.year}-{first.month:02d}"
    if "last year" in low:
        return str(day.year - 1)
    return day.isoformat()


def _first_date(span: str) -> str:
    return span.split(" to ")[0].strip()


def _parse_turns(block: str) -> list[_Turn]:
    turns: list[_Turn] = []
    session = ""
    for line in block.splitlines():
        m = _SESSION.match(line.strip())
        if m:
            session = m["session"]
            continue
        m = _TURN.match(line.strip())
        if m:
            turns.append(_Turn(m["id"], session, m["date"], m["speaker"], m["text"]))
    return turns


def _between(text: str, start: str, end: str) -> str:
    return text.split(start, 1)[1].split(end, 1)[0]


def _short(text: str, words: int = 24) -> str:
    text = re.sub(r"\[shares an image: ([^\]]*)\]", r"(sharing a photo: \1)", text)
    parts = text.split()
    return " ".join(parts[:words]).rstrip(",;") + ("..." if len(parts) > words else "")


# ------------------------------------------------------------------------------------------------- stages


def segment_reply(system: str, user: str) -> dict[str, Any]:
    max_turns = int(re.search(r"A scene holds at most (\d+) turns", system)[1])  # type: ignore[index]
    cap = min(CAP, max_turns)
    ends = "These are the last turns recorded so far" in user
    turns = _parse_turns(_between(user, "<conversation>", "</conversation>"))
    scenes: list[list[_Turn]] = []
    current: list[_Turn] = []
    for i, turn in enumerate(turns):
        current.append(turn)
        nxt = turns[i + 1] if i + 1 < len(turns) else None
        if len(current) >= cap:  # the maximum length closes a scene whatever follows
            scenes.append(current)
            current = []
            continue
        if nxt is None:
            if ends:
                scenes.append(current)
            break
        same_session = nxt.session == turn.session
        chunk_end = not same_session or (nxt.pos - 1) // CHUNK != (turn.pos - 1) // CHUNK
        if not chunk_end:
            continue
        if not same_session and ((turn.pos - 1) % CHUNK) + 1 < SHORT:
            continue  # a short session tail runs on into the next session
        scenes.append(current)
        current = []
    return {"scenes": [_scene_out(s) for s in scenes]}


def _scene_out(turns: list[_Turn]) -> dict[str, str]:
    text = " ".join(t.text for t in turns)
    kws = keywords(text) or ["conversation"]
    speakers = list(dict.fromkeys(t.speaker for t in turns))
    who = " and ".join(speakers)
    title = f"{who} talk about {', '.join(kws)}"
    substantive = sorted(turns, key=lambda t: (-len(t.text.split()), t.id))[:2]
    summary = " ".join(f"{t.speaker} said: {_short(t.text, 18)}" for t in sorted(substantive, key=lambda t: t.id))
    first = turns[0]
    narrative = f"On {first.date}, {who} talked about {', '.join(kws)}. " + " ".join(
        f"{t.speaker} said that {_short(t.text, 16)}" for t in turns[:3]
    )
    return {
        "first_turn": turns[0].id,
        "last_turn": turns[-1].id,
        "title": title,
        "summary": summary,
        "narrative": narrative,
    }


def topics_reply(user: str) -> dict[str, Any]:
    listed = _between(user, "<topics>\n", "\n</topics>")
    existing = {m[1].strip().casefold() for m in re.finditer(r"^- ([^:]+):", listed, flags=re.M)}
    blocks = re.findall(r"^\[(S\d+)\] [^·]+· (.*)$", _between(user, "<scenes>", "</scenes>"), flags=re.M)
    out = []
    for ref, title in blocks:
        kws = keywords(title.split(" talk about ", 1)[-1], 3) or ["conversation"]
        labels = [f"{kws[0].capitalize()} matters"]
        second = f"{kws[1].capitalize()} matters" if len(kws) > 1 else None
        if second and second.casefold() in existing:
            labels.append(second)  # admitted to an existing label as well (multi-label)
        choices = []
        for label in labels:
            known = label.casefold() in existing
            choices.append({"label": label, "description": None if known else f"Conversations about {label[:-8]}."})
            existing.add(label.casefold())
        out.append({"scene": ref, "topics": choices})
    return {"assignments": out}


def items_reply(user: str) -> dict[str, Any]:
    existing = {
        m[1].strip()
        for m in re.finditer(
            r"^\[E\d+\] (.*?)(?: \(\d{4}-\d\d-\d\d\))?$",
            _between(user, "<existing_items>\n", "\n</existing_items>"),
            flags=re.M,
        )
    }
    old = re.findall(
        r"^\[(S\d+)\] ([^·]+) · (.*?): ",
        _between(user, "<earlier_scenes>\n", "\n</earlier_scenes>"),
        flags=re.M,
    )
    body = _between(user, "<scenes>", "</scenes>")
    new_blocks = re.split(r"^(?=\[S\d+\] \(new\))", body.strip(), flags=re.M)
    scenes: list[tuple[str, str, str, bool, list[_Turn]]] = [
        (r, span.strip(), title, False, []) for r, span, title in old
    ]
    for block in new_blocks:
        if not block.strip():
            continue
        m = re.match(r"^\[(S\d+)\] \(new\) ([^·]+) · (.*)$", block.splitlines()[0])
        if m:
            scenes.append((m[1], m[2].strip(), m[3], True, _parse_turns(block)))
    scenes.sort(key=lambda s: int(s[0][1:]))
    atomic, connected = [], []
    for ref, _span, _title, new, turns in scenes:
        if not new:
            continue
        for speaker in dict.fromkeys(t.speaker for t in turns):
            mine = [t for t in turns if t.speaker == speaker and len(t.text.split()) >= 6]
            if not mine:
                continue
            best = sorted(mine, key=lambda t: (-len(t.text.split()), t.id))[0]
            text = f"On {best.date}, {speaker} said that {_short(best.text)}"
            if text not in existing:
                atomic.append(
                    {
                        "text": text,
                        "speaker": speaker,
                        "date": when(best.text, best.date),
                        "scene": ref,
                        "turns": [best.id],
                        "updates": None,
                    }
                )
    for (r1, span1, t1, _new1, _), (r2, span2, t2, new2, turns2) in itertools.pairwise(scenes):
        if not new2 or not turns2:
            continue  # new scenes follow the earlier ones: a pair with a new scene ends with it
        anchor = turns2[0]
        speaker = anchor.speaker
        subject = (keywords(t1 + " " + t2, 1) or ["this"])[0]
        text = (
            f"{speaker} came back to {subject} on {_first_date(span2)} after first discussing it on "
            f"{_first_date(span1)} ({t1}; then {t2})."
        )
        turn_ids = [anchor.id]
        if text not in existing:
            connected.append(
                {
                    "text": text,
                    "speaker": speaker,
                    "date": iso(_first_date(span2)),
                    "scenes": [r1, r2],
                    "turns": turn_ids,
                    "updates": None,
                }
            )
    return {"atomic_items": atomic, "connected_items": connected}


def item_triggers_reply(user: str) -> dict[str, Any]:
    n = int(re.search(r"Write (\d+) triggers for each", user)[1])  # type: ignore[index]
    items = re.findall(r"^\[(I\d+)\] (.*)$", _between(user, "<items>", "</items>"), flags=re.M)
    out = []
    for ref, text in items:
        kws = keywords(text, n) or ["experience"]
        tuples = []
        for g in range(n):
            kw = kws[g % len(kws)]
            tuples.append(
                {
                    "concept": f"{kw} experience" if g % 2 == 0 else f"personal {kw}",
                    "bridge": f"Planning a get-together where the subject of {kw} might come up again (angle {g + 1})",
                    "rationale": f"because knowing about the {kw} helps respond thoughtfully",
                }
            )
        out.append({"item": ref, "triggers": tuples})
    return {"items": out}


def scene_triggers_reply(user: str) -> dict[str, Any]:
    blocks = re.findall(r"^\[(S\d+)\] ([^·]+) · (.*)\n(.*)$", _between(user, "<scenes>", "</scenes>"), flags=re.M)
    out = []
    for ref, span, title, narrative in blocks:
        kws = keywords(title + " " + narrative, 3) or ["conversation"]
        out.append(
            {
                "scene": ref,
                "situation": f"A conversation between friends around {span.strip()}.",
                "object": f"The scene centres on {', '.join(kws)}.",
                "event": title.strip() + ".",
                "emotion": "The speakers sounded warm and engaged.",
                "horizon": [f"A later moment when {kw} becomes relevant again for one of them." for kw in kws[:3]]
                + ([] if len(kws) >= 2 else ["Catching up with the same friend some weeks later."]),
            }
        )
    return {"scenes": out}


_CATEGORIES = [
    ("occupation", ("work", "job", "career", "counsel", "business", "school", "study", "class", "office")),
    ("relationships", ("friend", "family", "kids", "child", "husband", "wife", "mother", "father", "partner")),
    ("hobbies", ("paint", "swim", "music", "read", "book", "dance", "camp", "hike", "run", "pottery", "guitar")),
    ("health", ("health", "sick", "doctor", "injur", "hospital", "stress")),
    ("goals", ("plan", "want", "goal", "hope", "dream", "future")),
    ("values", ("support", "help", "accept", "believe", "important")),
    ("preferences", ("enjoy", "favorite", "favourite", "prefer")),
]


def persona_reply(user: str) -> dict[str, Any]:
    speaker = re.search(r"^Speaker: <speaker>(.*)</speaker>$", user, flags=re.M)[1]  # type: ignore[index]
    facts = re.findall(r"^\[(I\d+)\] (.*)$", _between(user, "<facts>", "</facts>"), flags=re.M)
    prior = re.findall(r"^\[(P\d+)\] (\w+): (.*)$", user, flags=re.M)
    traits: dict[str, dict[str, Any]] = {}
    for ref, category, value in prior:
        traits[category] = {"category": category, "value": value, "support": [ref]}
    for ref, text in facts:
        low = text.lower()
        for category, stems in _CATEGORIES:
            if any(stem in low for stem in stems):
                entry = traits.setdefault(category, {"category": category, "value": "", "support": []})
                if not entry["value"]:
                    entry["value"] = f"{category.capitalize()}: {_short(text.split(' said that ', 1)[-1], 12)}"
                if len(entry["support"]) < 5:
                    entry["support"].append(ref)
                break
    if not traits and facts:
        traits["identity"] = {
            "category": "identity",
            "value": f"{speaker} is one of the two speakers",
            "support": [facts[0][0]],
        }
    return {
        "summary": f"{speaker} is a speaker in a long-running conversation with a friend.",
        "traits": list(traits.values()),
    }


# ------------------------------------------------------------------------------------------------- dispatch


def reply_for(system: str, user: str) -> str:
    """The JSON reply to one of tmem's construction prompts (raises ValueError for any other prompt)."""
    if "scene segmenter" in system:
        payload = segment_reply(system, user)
    elif "topic labels" in system and "<scenes>" in user:
        payload = topics_reply(user)
    elif "extract the memory items" in system:
        payload = items_reply(user)
    elif "retrieval triggers for the items" in system:
        payload = item_triggers_reply(user)
    elif "retrieval triggers for the scenes" in system:
        payload = scene_triggers_reply(user)
    elif "You keep the persona" in system:
        payload = persona_reply(user)
    else:
        raise ValueError(f"not a tmem construction prompt: {system[:80]!r}")
    return json.dumps(payload, ensure_ascii=False)


def scripted_reply(request: ChatRequest) -> str:
    """For ``scripted_llm(store, fn=scripted_reply)``."""
    return reply_for(request.messages[0].content, request.messages[1].content)


def stub_reply(body: dict[str, Any]) -> str:
    """For ``OpenAIStub(reply=stub_reply)``."""
    messages = body["messages"]
    return reply_for(messages[0]["content"], messages[1]["content"])


# ------------------------------------------------------------------------------------------------- test helpers


def dev_space(name: str = "conv-26", sessions: slice | None = None) -> Any:
    """One dev LoCoMo conversation as a SpaceInput, optionally only some of its sessions (in order)."""
    from pathlib import Path

    from tmem.ingest.reader import read_file

    path = Path(__file__).resolve().parents[3] / "shared" / "data" / "locomo10.dev.json"  # ../shared/data
    space = next(s for s in read_file(path) if s.name == name)
    if sessions is not None:
        space = space.model_copy(update={"sessions": space.sessions[sessions]})
    return space


def memory_snapshot(store: Any, space: str, *, with_seq: bool = True) -> dict[str, Any]:
    """Everything a build produced, as comparable plain data (ids, texts, links, trigger views, personas)."""
    items = store.items(Scope.local(space))
    return {
        "scenes": [
            (s.id, s.seq, s.title, s.summary, s.narrative, tuple(s.turn_ids)) for s in store.scenes(Scope.local(space))
        ],
        "topics": sorted((t.id, t.seq, t.label, t.description) for t in store.topics(Scope.local(space))),
        "links": sorted((link.topic_id, link.scene_id) for link in store.topic_links(Scope.local(space))),
        "items": sorted(
            (
                it.id,
                it.text,
                it.kind.value,
                tuple(it.scene_ids),
                it.speaker,
                it.date,
                tuple(it.turn_ids),
                it.supersedes,
                it.superseded_by,
            )
            + ((it.seq, it.topic_id) if with_seq else ())
            for it in items
        ),
        "triggers": sorted(
            (t.id, t.family.value, t.host_id, t.group, tuple((v.name, v.text) for v in t.views))
            for t in store.triggers(Scope.local(space))
        ),
        "personas": sorted(p.model_dump_json() for p in store.personas(Scope.local(space))) if with_seq else [],
    }


# ------------------------------------------------------------------------------------------------- measurement


def measure(names: list[str], *, faults: float = 0.0, plan: str = "--sequential") -> str:
    """Build dev conversations with `tmem build` against the stub server; a Markdown table of calls and tokens."""
    import tempfile
    from pathlib import Path

    from click.testing import CliRunner

    from tests.support.openai_stub import OpenAIStub
    from tmem.cli.main import cli
    from tmem.ingest.importer import import_spaces
    from tmem.llm.cost import cost_report
    from tmem.store.sqlite import SQLiteStore

    rows = ["| conversation | stage | calls | prompt tokens | output tokens |", "| --- | --- | ---: | ---: | ---: |"]
    with tempfile.TemporaryDirectory() as home, OpenAIStub(reply=stub_reply, fault_rate=faults, seed=3) as stub:
        env = stub.env(home)
        for name in names:
            store = SQLiteStore.open(Path(home) / "tmem.db")
            import_spaces(store, [dev_space(name)], source="dev")
            store.close()
            result = CliRunner().invoke(cli, ["build", name, "--no-progress", plan], env=env)
            if result.exit_code != 0:
                raise RuntimeError(result.output)
            store = SQLiteStore.open(Path(home) / "tmem.db")
            report = cost_report(store, Scope.local(name))
            store.close()
            for s in [*report.stages, report.total]:
                rows.append(f"| {name} | {s.stage} | {s.calls} | {s.input_tokens:,} | {s.output_tokens:,} |")
    return "\n".join(rows)


if __name__ == "__main__":  # python -m tests.support.stage_replies [--few-rounds|--sequential] conv-26 [conv-30 ...]
    import sys

    args = sys.argv[1:]
    plans = [a for a in args if a in ("--few-rounds", "--sequential")]
    print(measure([a for a in args if a not in plans] or ["conv-26"], plan=plans[0] if plans else "--sequential"))
