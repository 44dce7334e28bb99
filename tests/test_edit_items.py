"""One memory at a time on a real dev conversation: get/update/history/delete of items, forgetting turns and items
with tombstones, and erasure checked over the raw bytes of every file of the memory directory (WAL included)."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

import pytest

from tests.support.data import locomo_slice
from tmem import Memory, NotFoundError, Settings
from tmem.construct.check import check_space
from tmem.edit.forget import canary_free
from tmem.embed import HashEmbedder
from tmem.models import Item, LLMCall
from tmem.scope import Scope

CANARY = "Zorblaxian-7Q quartz canary"


def _open(home: Path) -> Memory:
    return Memory.open(settings=Settings(home=home, llm="none"), embedder=HashEmbedder())


def _raw(home: Path) -> bytes:
    return b"".join(p.read_bytes() for p in sorted(home.rglob("*")) if p.is_file())


def _with_canary(mem: Memory, space: str) -> str:
    """A canary message appended to the conversation (its own session), built; returns the turn id."""
    last = mem.store.last_turn(Scope.local(space))
    assert last is not None
    when = datetime(last.time.year + 1, 1, 5, 10, 0)
    report = mem.add_messages(
        space,
        [
            {
                "speaker": "Caroline",
                "text": f"My secret collection is the {CANARY} from the museum trip.",
                "time": when,
            },
            {"speaker": "Melanie", "text": "That sounds wonderful, tell me more about the museum trip!"},
        ],
    )
    mem.build(space)
    return report.added[0]


def test_item_get_update_history_delete(tmp_path: Path) -> None:
    home = tmp_path / "mem"
    with _open(home) as mem:
        mem.import_file(locomo_slice(tmp_path / "slice.json"))
        (space,) = [s.name for s in mem.spaces()]
        mem.build(space)
        item = next(i for i in mem.store.items(Scope.local(space)) if "support group" in i.text)
        assert mem.get_item(space, item.id) == item
        updated = mem.update_item(space, item.id, "Caroline leads a weekly LGBTQ support group in Boston.")
        assert updated.text.startswith("Caroline leads")
        concepts = {t.fields["concept"] for t in mem.store.triggers(Scope.local(space), host_ids=[item.id])}
        assert "Boston" in concepts  # Entity triggers regenerated from the new text
        hist = mem.history(space, item.id)
        assert [v.change for v in hist.versions] == ["extracted", "edited"]
        assert hist.versions[0].text == item.text and hist.versions[1].at is not None
        hits = mem.search(space, "weekly support group Boston")
        assert item.id in [h.item.id for h in hits.items]
        mem.build(space, rebuild=True)  # an edit outlives a rebuild
        assert mem.get_item(space, item.id).text == updated.text
        report = mem.delete_item(space, item.id)
        assert report.items_forgotten == [item.id]
        with pytest.raises(NotFoundError, match="no item"):
            mem.get_item(space, item.id)
        mem.build(space, rebuild=True)  # tombstone: no rebuild brings it back
        assert not mem.store.items(Scope.local(space), [item.id])
        assert item.id not in [h.item.id for h in mem.search(space, "support group").items]
        assert mem.forget(space, item_ids=[item.id]).already_forgotten == [item.id]


def test_forget_turn_leaves_no_copy_on_disk(tmp_path: Path) -> None:
    home = tmp_path / "mem"
    with _open(home) as mem:
        mem.import_file(locomo_slice(tmp_path / "slice.json"))
        (space,) = [s.name for s in mem.spaces()]
        mem.build(space)
        turn_id = _with_canary(mem, space)
        # an LLM log row quoting the turn, and an unrelated one that must stay
        for n, response in enumerate([json.dumps({"summary": f"Caroline owns the {CANARY}."}), '{"x": 1}']):
            mem.store.log_llm_call(
                LLMCall(space=space, stage="segment", model="m", request_hash=f"h{n}", tokens_in=1, tokens_out=1,
                        latency_ms=1.0, attempts=1, outcome="ok", created_at=datetime(2024, 1, 1), response=response)
            )  # fmt: skip
        assert mem.search(space, CANARY).scenes
        assert not canary_free(_raw(home), CANARY)
        report = mem.forget(space, turn_ids=[turn_id])
        assert report.turns_forgotten == [turn_id] and report.items_forgotten and report.erased
        assert report.llm_calls_deleted == 1
        assert mem.store.cached_response(Scope.local(space), "h1") == '{"x": 1}'
        result = mem.search(space, CANARY)
        assert CANARY not in result.model_dump_json(exclude={"query"})
        assert turn_id not in {tid for s in mem.store.scenes(Scope.local(space)) for tid in s.turn_ids}
        assert (
            check_space(mem.store, Scope.local(space)).violations == []
        )  # the memory stays consistent after forgetting
        # no re-add, no rebuild brings it back
        assert mem.add_messages(space, [{"id": turn_id, "speaker": "Caroline", "text": "x"}]).forgotten == [turn_id]
        mem.build(space, rebuild=True)
        assert CANARY not in mem.export(space).model_dump_json()
    assert canary_free(_raw(home), CANARY), "the forgotten text is still in a file of the memory directory"


def test_delete_space_leaves_no_copy_on_disk(tmp_path: Path) -> None:
    home = tmp_path / "mem"
    with _open(home) as mem:
        mem.import_file(locomo_slice(tmp_path / "slice.json", sessions=1))
        (space,) = [s.name for s in mem.spaces()]
        mem.build(space)
        _with_canary(mem, space)
        mem.add_messages("other", [{"speaker": "a", "text": "unrelated words stay", "time": "2024-01-01T10:00"}])
        assert not canary_free(_raw(home), CANARY)
        mem.delete_space(space)
        assert [s.name for s in mem.spaces()] == ["other"]
    raw = _raw(home)
    assert canary_free(raw, CANARY)
    assert b"unrelated words stay" in raw


def test_forgotten_turn_stays_out_of_reimports(tmp_path: Path) -> None:
    data = locomo_slice(tmp_path / "slice.json")
    with _open(tmp_path / "mem") as mem:
        mem.import_file(data)
        (space,) = [s.name for s in mem.spaces()]
        mem.build(space)
        target = mem.store.turns(Scope.local(space))[2]
        mem.forget(space, turn_ids=[target.id])
        mem.import_file(data)  # the same file again
        assert target.id not in {t.id for t in mem.store.turns(Scope.local(space))}
        mem.build(space, rebuild=True)
        assert all(target.id not in i.turn_ids for i in mem.store.items(Scope.local(space)))
        with pytest.raises(NotFoundError, match="no turn"):
            mem.forget(space, turn_ids=["no-such-turn"])


def test_history_chain_and_forgetting_the_newer_item_restores_the_older(tmp_path: Path) -> None:
    from tmem.models import ItemKind, Scene

    with _open(tmp_path / "mem") as mem:
        mem.add_messages("u", [{"id": "t1", "speaker": "ann", "text": "I live in Paris now", "time": "2024-01-01"}])
        s = mem.store
        s.put_scenes(Scope.local("u"), [Scene(id="sc", seq=0, title="t", summary="s", narrative="", turn_ids=["t1"],
                                 start=datetime(2024, 1, 1), end=datetime(2024, 1, 1))])  # fmt: skip
        s.put_items(
            Scope.local("u"),
            [
                Item(id="old", text="Ann lives in Rome.", kind=ItemKind.ATOMIC, scene_ids=["sc"], date="2023-01-01",
                     superseded_by="mid", turn_ids=["t1"]),
                Item(id="mid", text="Ann lives in Oslo.", kind=ItemKind.ATOMIC, scene_ids=["sc"], date="2023-06-01",
                     supersedes="old", superseded_by="new", turn_ids=["t1"]),
                Item(id="new", text="Ann lives in Paris.", kind=ItemKind.ATOMIC, scene_ids=["sc"], date="2024-01-01",
                     supersedes="mid", turn_ids=["t1"]),
            ],
        )  # fmt: skip
        hist = mem.history("u", "mid")
        assert [i.id for i in hist.supersedes] == ["old"] and [i.id for i in hist.superseded_by] == ["new"]
        assert [i.date for i in mem.history("u", "new").supersedes] == ["2023-06-01", "2023-01-01"]
        mem.forget("u", item_ids=["new"])
        assert mem.get_item("u", "mid").superseded_by is None  # the older fact is current again
        assert mem.history("u", "mid").superseded_by == []
