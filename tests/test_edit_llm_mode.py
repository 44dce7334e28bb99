"""Item edits and forgetting on an LLM-built memory (scripted model replies computed from the prompts): the item
trigger stage runs for the edited item only, and a forgotten turn leaves no byte of its text in any file, although
the model's scene summaries, items, triggers and cached replies had copied it."""

from __future__ import annotations

import json
from pathlib import Path

from tests.support.stage_replies import scripted_reply
from tmem import Memory, Settings
from tmem.construct.check import check_space
from tmem.construct.triggers import ITEM_STAGE
from tmem.edit.forget import canary_free
from tmem.embed import HashEmbedder
from tmem.llm.scripted import ScriptedBackend, scripted_llm
from tmem.models import TriggerFamily
from tmem.scope import Scope
from tmem.store import open_store

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "locomo10.dev.json"
CANARY = "Quixotryl-44 canary fern"


def _slice(tmp_path: Path) -> Path:
    sample = json.loads(DATA.read_text())[0]
    conv = sample["conversation"]
    keep = {k: conv[k] for k in ("speaker_a", "speaker_b", "session_1", "session_1_date_time")}
    keep["session_1"] = [dict(t) for t in keep["session_1"]]
    keep["session_1"][4]["text"] = f"I planted a {CANARY} in my garden, it is growing so well this spring!"
    path = tmp_path / "slice.json"
    path.write_text(json.dumps([{"sample_id": "conv-x", "conversation": keep, "qa": []}]))
    return path


def _raw(home: Path) -> bytes:
    return b"".join(p.read_bytes() for p in sorted(home.rglob("*")) if p.is_file())


def test_llm_mode_item_edit_and_forget(tmp_path: Path) -> None:
    home = tmp_path / "mem"
    store = open_store(home / "tmem.db")
    llm = scripted_llm(store, fn=scripted_reply)
    backend = llm.backend
    assert isinstance(backend, ScriptedBackend)
    with Memory(store, Settings(home=home, llm="none"), llm=llm, embedder=HashEmbedder()) as mem:
        mem.import_file(_slice(tmp_path))
        report = mem.build("conv-x")
        assert report.mode == "llm"
        assert not canary_free(_raw(home), CANARY)
        item = mem.store.items(Scope.local("conv-x"))[0]
        before = len(backend.requests)
        mem.update_item("conv-x", item.id, "Caroline keeps a rooftop beehive in the city.")
        sent = backend.requests[before:]
        assert [r.stage for r in sent] == [ITEM_STAGE] and "rooftop beehive" in sent[0].messages[-1].content
        families = {t.family for t in mem.store.triggers(Scope.local("conv-x"), host_ids=[item.id])}
        assert families == {TriggerFamily.ENTITY, TriggerFamily.BRIDGE}
        assert mem.history("conv-x", item.id).versions[-1].text.startswith("Caroline keeps")

        canary_turn = next(t.id for t in mem.store.turns(Scope.local("conv-x")) if CANARY in t.text)
        forgot = mem.forget("conv-x", turn_ids=[canary_turn])
        assert forgot.scenes_rewritten or forgot.scenes_deleted
        assert forgot.llm_calls_deleted > 0
        assert CANARY not in mem.export("conv-x").model_dump_json()
        assert check_space(mem.store, Scope.local("conv-x")).violations == []
        # the next build regenerates the rewritten scene's triggers; nothing brings the turn back
        mem.build("conv-x")
        assert CANARY not in mem.export("conv-x").model_dump_json()
        assert len({t.host_id for t in mem.store.triggers(Scope.local("conv-x"), family=TriggerFamily.SCENE)}) == len(
            mem.store.scenes(Scope.local("conv-x"))
        )
    assert canary_free(_raw(home), CANARY)


def test_llm_build_between_messages_equals_one_build() -> None:
    """Messages appended to the open session after an LLM build: the segmenter re-reads the provisional last scene
    with them, so builds between messages end with the memory of one build (scripted replies are local by design)."""
    from datetime import datetime, timedelta

    from tests.support.stage_replies import memory_snapshot

    words = ["garden", "tomatoes", "hiking", "Grenoble", "weather", "museum", "pottery", "kitten", "river", "bakery"]
    messages: list[dict[str, object]] = []
    when = datetime(2024, 3, 1, 9, 0)
    for session in (1, 2):
        for n in range(1, 15):
            when += timedelta(minutes=1)
            text = f"we talked about {words[n % 10]} and {words[n * 3 % 10]} on day {session}"
            messages.append({"id": f"D{session}:{n}", "speaker": ("ann", "bo")[n % 2], "text": text, "time": when})
        when += timedelta(days=3)

    def memory() -> Memory:
        store = open_store(":memory:")
        return Memory(store, Settings(llm="none"), llm=scripted_llm(store, fn=scripted_reply), embedder=HashEmbedder())

    with memory() as once, memory() as steps:
        once.add_messages("u", messages)
        once.build("u")
        start = 0
        for cut in (5, 11, 20, len(messages)):
            steps.add_messages("u", messages[start:cut])
            steps.build("u")
            start = cut
        assert len(steps.store.sessions(Scope.local("u"))) == 2
        assert memory_snapshot(steps.store, "u", with_seq=False) == memory_snapshot(once.store, "u", with_seq=False)
        assert steps.staleness("u").stale_turns == 0
