"""CLI: `tmem import`, `tmem spaces`, `tmem show` on a real memory directory."""

from __future__ import annotations

import copy
import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from tests.support.data import DEV_LOCOMO
from tmem.cli.ingest_cmds import DESCRIPTIVE_ONLY
from tmem.cli.main import cli
from tmem.construct.report import STATE_MODE, STATE_SESSIONS
from tmem.errors import InputError
from tmem.models import (
    BuildMode,
    Item,
    ItemKind,
    Persona,
    PersonaTrait,
    Scene,
    Topic,
    TopicSceneLink,
    Trigger,
    TriggerFamily,
    TriggerView,
)
from tmem.scope import Scope
from tmem.store.sqlite import SQLiteStore

LOCOMO = DEV_LOCOMO
if not LOCOMO.exists():
    LOCOMO = Path(__file__).resolve().parents[2] / "shared" / "data" / "locomo10.dev.json"
SESSION_KEY = re.compile(r"^session_(\d+)$")


@pytest.fixture(scope="module")
def raw() -> list[dict[str, Any]]:
    data: list[dict[str, Any]] = json.loads(LOCOMO.read_text(encoding="utf-8"))
    return data


def run(home: Path, *args: str) -> Result:
    return CliRunner().invoke(cli, ["--dir", str(home), *args], catch_exceptions=True)


def spaces_json(home: Path) -> list[dict[str, Any]]:
    result = run(home, "spaces", "--json")
    assert result.exit_code == 0, result.output
    data: list[dict[str, Any]] = json.loads(result.stdout)
    return data


def test_import_spaces_and_reimport(tmp_path: Path, raw: list[dict[str, Any]]) -> None:
    result = run(tmp_path, "import", str(LOCOMO))
    assert result.exit_code == 0, result.output
    assert "conv-26 (new space): 19 sessions added, 0 already stored, 419 turns added" in result.stdout
    listed = spaces_json(tmp_path)
    expected = {}
    for sample in raw:
        sessions = [v for k, v in sample["conversation"].items() if SESSION_KEY.match(k) and v]
        expected[sample["sample_id"]] = (len(sessions), sum(len(s) for s in sessions))
    assert {s["name"]: (s["sessions"], s["turns"]) for s in listed} == expected
    assert {s["build_state"] for s in listed} == {"not built"}
    first = listed[0]
    assert first["first_date"] == "2023-05-08T13:56:00" and first["build_mode"] is None

    again = run(tmp_path, "import", str(LOCOMO), "--json")
    assert again.exit_code == 0, again.output
    report = json.loads(again.stdout)
    assert report["sessions_added"] == 0 and report["turns_added"] == 0
    assert report["sessions_skipped"] == sum(c[0] for c in expected.values())
    assert spaces_json(tmp_path) == listed

    table = run(tmp_path, "spaces").stdout.splitlines()
    assert table[0].split() == ["SPACE", "SESSIONS", "TURNS", "FIRST", "LAST", "BUILD"]
    assert table[1].split()[:3] == ["conv-26", "19", "419"] and table[1].endswith("not built")


def test_empty_directory(tmp_path: Path) -> None:
    result = run(tmp_path, "spaces")
    assert result.exit_code == 0 and "No spaces" in result.stdout and "tmem import FILE" in result.stdout
    assert spaces_json(tmp_path) == []
    missing = run(tmp_path, "show", "nobody")
    assert missing.exit_code == 1 and "No space named 'nobody'" in str(missing.exception)


def _malformed(raw: list[dict[str, Any]], kind: str) -> str:
    data = copy.deepcopy(raw[:2])
    conv = data[1]["conversation"]
    if kind == "missing speaker":
        del conv["session_2"][3]["speaker"]
    elif kind == "bad date":
        conv["session_3_date_time"] = "sometime in May"
    elif kind == "wrong type":
        conv["session_2"][3]["text"] = ["not", "a", "string"]
    else:
        return json.dumps(data)[:-40]  # broken JSON: cut off
    return json.dumps(data)


@pytest.mark.parametrize(
    ("kind", "where"),
    [
        ("missing speaker", r"\$\[1\]\.conversation\.session_2\[3\]\.speaker: missing"),
        ("bad date", r"\$\[1\]\.conversation\.session_3_date_time: cannot read the date"),
        ("wrong type", r"\$\[1\]\.conversation\.session_2\[3\]\.text: expected a string"),
        ("broken JSON", r"broken JSON at line 1, column \d+"),
    ],
)
def test_malformed_file_exits_1_and_leaves_store_unchanged(
    tmp_path: Path, raw: list[dict[str, Any]], kind: str, where: str
) -> None:
    home = tmp_path / "home"
    assert run(home, "import", str(LOCOMO), "--space", raw[0]["sample_id"]).exit_code == 0
    before = spaces_json(home)
    bad = tmp_path / f"{kind.replace(' ', '_')}.json"
    bad.write_text(_malformed(raw, kind), encoding="utf-8")
    result = run(home, "import", str(bad))
    assert result.exit_code == 1
    assert isinstance(result.exception, InputError)
    assert re.search(re.escape(str(bad)) + ": .*" + where, str(result.exception)), str(result.exception)
    assert spaces_json(home) == before


def test_console_script_prints_one_line_error(tmp_path: Path, raw: list[dict[str, Any]]) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(_malformed(raw, "missing speaker"), encoding="utf-8")
    tmem = Path(sys.executable).with_name("tmem")
    env = {**os.environ, "TMEM_HOME": str(tmp_path / "home")}
    proc = subprocess.run([str(tmem), "import", str(bad)], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr + proc.stdout
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: ") and str(bad) in lines[0]
    assert "session_2[3].speaker: missing" in lines[0]


# --------------------------------------------------------------------------------------------- show

# Hand-written nodes for conv-26's first scene, as a build would store them (not produced by a model).
SCENE = Scene(
    id="sc-0001",
    seq=0,
    title="Caroline's first LGBTQ support group",
    summary="Caroline tells Melanie she went to an LGBTQ support group on 7 May 2023 and found it empowering.",
    narrative="On 8 May 2023 Caroline told Melanie that she had attended an LGBTQ support group the day before.",
    turn_ids=["D1:3", "D1:4", "D1:5", "D1:6", "D1:7"],
    start=datetime(2023, 5, 8, 13, 56),
    end=datetime(2023, 5, 8, 13, 56),
    mode=BuildMode.EXTRACTIVE,
)
TOPIC = Topic(id="tp-0001", seq=0, label="LGBTQ community", description="Caroline's involvement and support")
ITEMS = [
    Item(
        id="it-0001",
        text="On 7 May 2023 Caroline attended an LGBTQ support group.",
        kind=ItemKind.ATOMIC,
        scene_ids=["sc-0001"],
        topic_id="tp-0001",
        speaker="Caroline",
        date="2023-05-07",
        turn_ids=["D1:3"],
        mode=BuildMode.EXTRACTIVE,
    ),
    Item(
        id="it-0002",
        text="Caroline says the support group made her feel accepted.",
        kind=ItemKind.ATOMIC,
        scene_ids=["sc-0001"],
        topic_id="tp-0001",
        speaker="Caroline",
        supersedes="it-0001",
        seq=1,
        mode=BuildMode.EXTRACTIVE,
    ),
]
TRIGGERS = [
    Trigger(
        id="tr-0001",
        family=TriggerFamily.ENTITY,
        host_kind="item",
        host_id="it-0001",
        fields={"concept": "support group"},
        views=[TriggerView(name="concept", text="LGBTQ support group")],
    ),
    Trigger(
        id="tr-0002",
        family=TriggerFamily.ENTITY,
        host_kind="item",
        host_id="it-0001",
        group=1,
        views=[TriggerView(name="concept", text="Caroline")],
    ),
]
PERSONA = Persona(
    speaker="Caroline",
    traits=[PersonaTrait(category="identity", value="transgender woman", item_ids=["it-0001"])],
    summary="Caroline is active in the LGBTQ community.",
)


@pytest.fixture
def built(tmp_path: Path) -> Iterator[Path]:
    assert run(tmp_path, "import", str(LOCOMO), "--space", "conv-26").exit_code == 0
    store = SQLiteStore.open(tmp_path / "tmem.db")
    store.put_scenes(Scope.local("conv-26"), [SCENE])
    store.put_topics(Scope.local("conv-26"), [TOPIC])
    store.link_topics(Scope.local("conv-26"), [TopicSceneLink(topic_id=TOPIC.id, scene_id=SCENE.id)])
    store.put_items(Scope.local("conv-26"), ITEMS)
    store.put_triggers(Scope.local("conv-26"), TRIGGERS)
    store.put_persona(Scope.local("conv-26"), PERSONA)
    store.set_state(Scope.local("conv-26"), STATE_MODE, BuildMode.EXTRACTIVE.value)
    store.set_state(Scope.local("conv-26"), STATE_SESSIONS, "19")
    store.close()
    yield tmp_path


def test_show_overview(built: Path) -> None:
    result = run(built, "show", "conv-26")
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "speakers:  Caroline, Melanie" in out and "sessions:  19   turns: 419" in out
    assert "build:     built (extractive)" in out
    assert "scenes 1, topics 1, items 2 (2 atomic, 0 connected, 0 superseded), personas 1" in out
    assert "entity 2, bridge 0, horizon 0, scene 0" in out
    assert DESCRIPTIVE_ONLY in out

    data = json.loads(run(built, "show", "conv-26", "--json").stdout)
    assert data["counts"] == {
        "scenes": 1, "topics": 1, "items": 2, "items_atomic": 2, "items_connected": 0, "items_superseded": 0,
        "triggers": {"entity": 2, "bridge": 0, "horizon": 0, "scene": 0}, "personas": 1,
    }  # fmt: skip
    assert data["descriptive_only"] is True and data["note"] == DESCRIPTIVE_ONLY
    assert data["build_state"] == "built" and data["build_mode"] == "extractive"
    assert data["speakers"] == ["Caroline", "Melanie"] and data["turns"] == 419
    assert not {"scenes", "topics", "items", "triggers", "persona"} & set(data)


def test_show_sections_text(built: Path) -> None:
    out = run(built, "show", "conv-26", "--scenes", "--topics", "--items", "--triggers", "--persona").stdout
    assert out.startswith(f"conv-26: {DESCRIPTIVE_ONLY}")
    assert "[sc-0001] Caroline's first LGBTQ support group" in out
    assert "turns (5): D1:3, D1:4, D1:5, D1:6, D1:7" in out and "topics: tp-0001" in out
    assert "[tp-0001] LGBTQ community: Caroline's involvement and support" in out
    assert "    - [sc-0001] Caroline's first LGBTQ support group" in out
    assert "[it-0001] atomic | scenes sc-0001 | topic tp-0001 | 7 May 2023 | Caroline" in out
    assert "supersedes it-0001" in out
    host = out.index("item [it-0001] On 7 May 2023 Caroline attended")
    assert host < out.index("entity #0 [tr-0001]") < out.index("concept: LGBTQ support group")
    assert out.index("entity #1 [tr-0002]") > host and out.count("item [it-0001]") == 1
    assert "- identity: transgender woman  [items: it-0001]" in out


def test_show_sections_json(built: Path) -> None:
    flags = ["--scenes", "--topics", "--items", "--triggers", "--persona"]
    data = json.loads(run(built, "show", "conv-26", "--json", *flags).stdout)
    [scene] = data["scenes"]
    assert scene["turn_ids"] == SCENE.turn_ids and scene["topic_ids"] == ["tp-0001"]
    assert scene["start"] == "2023-05-08T13:56:00" and scene["mode"] == "extractive"
    assert data["topics"] == [{**TOPIC.model_dump(mode="json"), "scene_ids": ["sc-0001"]}]
    assert [i["id"] for i in data["items"]] == ["it-0001", "it-0002"] and data["items"][1]["supersedes"] == "it-0001"
    assert [(t["id"], t["family"], t["host_id"]) for t in data["triggers"]] == [
        ("tr-0001", "entity", "it-0001"),
        ("tr-0002", "entity", "it-0001"),
    ]
    assert data["triggers"][0]["views"] == [{"name": "concept", "text": "LGBTQ support group"}]
    assert data["persona"] == [PERSONA.model_dump(mode="json")]
    only_items = json.loads(run(built, "show", "conv-26", "--json", "--items").stdout)
    assert "items" in only_items and "scenes" not in only_items
