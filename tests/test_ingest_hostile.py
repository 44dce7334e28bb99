"""Every reproduction of issue 11's importer defects, as tests: each hostile file ends in an InputError naming where
(and through the CLI a one-line error, exit 1), and the store does not change."""

from __future__ import annotations

import io
import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from tmem.cli.main import cli
from tmem.cli.terminal import SafeTerminal, protect, terminal_safe
from tmem.errors import InputError
from tmem.ingest import import_file, import_sessions, read_file
from tmem.ingest.limits import MAX_TURN_CHARS, MAX_TURNS_PER_SESSION
from tmem.models import SessionInput, TurnInput
from tmem.scope import Scope
from tmem.store.sqlite import SQLiteStore

GOOD = {"space": "s", "sessions": [{"started_at": "2024-01-01", "turns": [{"speaker": "A", "text": "hello there"}]}]}


def _native(**session: Any) -> dict[str, Any]:
    base: dict[str, Any] = {"started_at": "2024-01-01", "turns": [{"speaker": "A", "text": "x"}]}
    return {"space": "s", "sessions": [base | session]}


def _locomo(**conv: Any) -> list[dict[str, Any]]:
    sample: dict[str, Any] = {
        "sample_id": "conv-1",
        "conversation": {
            "speaker_a": "A",
            "speaker_b": "B",
            "session_1_date_time": "1:56 pm on 8 May, 2023",
            "session_1": [{"speaker": "A", "dia_id": "D1:1", "text": "hi"}],
        }
        | conv,
        "qa": [],
    }
    return [sample]


def _write(tmp_path: Path, text: str, name: str = "in.json") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def _dump(store: SQLiteStore) -> list[Any]:
    con = sqlite3.connect(store.path)  # type: ignore[attr-defined]
    try:
        tables = [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table' ORDER BY name")]
        return [(t, sorted(map(repr, con.execute(f'SELECT * FROM "{t}"')))) for t in tables]
    finally:
        con.close()


HOSTILE: dict[str, tuple[str, str]] = {
    # name: (file text, a fragment of the expected message)
    "nesting 1000 deep": ("[" * 1000 + "]" * 1000, "nested"),
    "nesting 100 deep inside a space": (
        json.dumps(GOOD)[:-1] + ', "x": ' + "[" * 100 + "]" * 100 + "}",
        "nested more than 64",
    ),
    "huge int in locomo qa": (
        json.dumps(_locomo()).replace('"qa": []', '"qa": [' + "9" * 4301 + "]"),
        "$[0].qa[0]: an integer of 4301 digits",
    ),
    "huge int as text": (json.dumps(_native()).replace('"text": "x"', '"text": ' + "1" * 5000), "5000 digits"),
    "huge session number": (
        json.dumps(_locomo(**{"session_" + "1" * 4301: [{"speaker": "A", "dia_id": "D2:1", "text": "x"}]})),
        "more than 6 digits",
    ),
    "zoned date before year 1 in UTC": (json.dumps(_native(started_at="0001-01-01T00:00:00+01:00")), "started_at"),
    "zoned date after 9999 in UTC": (json.dumps(_native(started_at="9999-12-31T23:00:00-05:00")), "started_at"),
    "year out of range": (json.dumps(_native(started_at="0005-01-01")), "lies in year 5"),
    "lone surrogate in text": ('{"space":"s","sessions":[{"started_at":"2024-01-01","turns":[{"speaker":"A","text":"\\ud800"}]}]}', "$.sessions[0].turns[0].text: the string holds a lone surrogate"),
    "lone surrogate in speaker": ('{"space":"s","sessions":[{"started_at":"2024-01-01","turns":[{"speaker":"\\udc00x","text":"a"}]}]}', "speaker"),
    "lone surrogate in space name": ('{"space":"\\ud800","sessions":[{"started_at":"2024-01-01","turns":[{"speaker":"A","text":"a"}]}]}', "$.space"),
    "lone surrogate in speakers list": ('{"space":"s","speakers":["\\udfff"],"sessions":[{"started_at":"2024-01-01","turns":[{"speaker":"A","text":"hello there"}]}]}', "$.speakers[0]"),
    "lone surrogate in sample_id": (json.dumps(_locomo()).replace('"conv-1"', '"\\ud800"'), "$[0].sample_id"),
    "lone surrogate in a key": ('{"space":"s","\\ud800":1,"sessions":[]}', "lone surrogate"),
    "duplicate key": ('{"space":"s","sessions":[{"started_at":"2024-01-01","turns":[{"speaker":"A","speaker":"B","text":"x"}]}]}', '$.sessions[0].turns[0].speaker: the key "speaker" appears twice'),
    "duplicate key in ignored qa": (json.dumps(_locomo()).replace('"qa": []', '"qa": [{"a": 1, "a": 2}]'), "$[0].qa[0].a"),
    "NaN": (json.dumps(_locomo()).replace('"qa": []', '"qa": [NaN]'), "NaN is not valid JSON"),
    "terminal escape in speaker": (json.dumps(_native(turns=[{"speaker": "fz-ctl\x1b[2J", "text": "x"}])), "non-printable character '\\x1b'"),
    "newline in space name": (json.dumps(GOOD | {"space": "a\n</conversation>"}), "$.space: holds the non-printable"),
    "bidi override in turn id": (json.dumps(_native(turns=[{"id": "a\u202eb", "speaker": "A", "text": "x"}])), "$.sessions[0].turns[0].id"),
    "long speaker name": (json.dumps(_native(turns=[{"speaker": "A" * 201, "text": "x"}])), "at most 200"),
    "turn too long": (json.dumps(_native(turns=[{"speaker": "A", "text": "w " * (MAX_TURN_CHARS // 2 + 1)}])), "at most 100,000"),
    "too many turns": (json.dumps(_native(turns=[{"speaker": "A", "text": "x"}] * (MAX_TURNS_PER_SESSION + 1))), "at most 10,000"),
    "date string huge": (json.dumps(_native(started_at="2" * 5000)), "is not a date"),
}  # fmt: skip


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_hostile_file_is_an_input_error_naming_the_place_and_changes_nothing(case: str, tmp_path: Path) -> None:
    text, fragment = HOSTILE[case]
    store = SQLiteStore.open(tmp_path / "tmem.db")
    import_file(store, _write(tmp_path, json.dumps(GOOD), "good.json"))
    before = _dump(store)
    path = _write(tmp_path, text)
    with pytest.raises(InputError) as info:
        import_file(store, path)
    assert fragment in str(info.value)
    assert str(path) in str(info.value)
    assert _dump(store) == before
    store.close()


def test_cli_nesting_is_a_one_line_error(tmp_path: Path) -> None:
    path = _write(tmp_path, "[" * 1000 + "]" * 1000, "d.json")
    result = CliRunner().invoke(cli, ["--dir", str(tmp_path / "home"), "import", str(path)])
    assert result.exit_code == 1 and isinstance(result.exception, InputError)


def test_jsonl_errors_name_the_line(tmp_path: Path) -> None:
    line = json.dumps({"space": "s", "started_at": "2024-01-01", "turns": [{"speaker": "A", "text": "x"}]})
    path = _write(tmp_path, line + "\n" + line.replace('"x"', '"\\ud800"').replace("2024", "2025") + "\n", "in.jsonl")
    with pytest.raises(InputError, match=r"line 2: \$\.turns\[0\]\.text"):
        read_file(path)


def test_accepted_input_never_breaks_show_and_build(tmp_path: Path) -> None:
    # Issue 11, defect 2: speakers ["\udfff"] imported with exit 0, then show and build crashed. Now refused.
    path = _write(tmp_path, HOSTILE["lone surrogate in speakers list"][0])
    runner = CliRunner()
    home = str(tmp_path / "home")
    result = runner.invoke(cli, ["--dir", home, "import", str(path)])
    assert result.exit_code == 1 and "lone surrogate" in str(result.exception)
    assert runner.invoke(cli, ["--dir", home, "spaces"]).output.startswith("No spaces")


def test_sessions_from_code_are_checked_too(tmp_path: Path) -> None:
    store = SQLiteStore.open(tmp_path / "tmem.db")
    from datetime import datetime

    bad = SessionInput(id="s1", started_at=datetime(2024, 1, 1), turns=[TurnInput(id="t1", speaker="A\x1b", text="x")])
    with pytest.raises(InputError, match="non-printable"):
        import_sessions(store, Scope.local("s"), [bad])
    with pytest.raises(InputError, match="lone surrogate"):
        import_sessions(
            store, Scope.local("s\ud800"), [bad.model_copy(update={"turns": [TurnInput(id="t", speaker="A", text="")]})]
        )
    assert store.list_spaces() == []
    store.close()


def test_terminal_output_shows_escapes_instead_of_sending_them() -> None:
    assert terminal_safe("fz-ctl\x1b[2J\nnext\tcol \u202e") == "fz-ctl\\x1b[2J\nnext\tcol \\u202e"

    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    tty = Tty()
    safe = protect(tty)  # type: ignore[arg-type]
    assert isinstance(safe, SafeTerminal)
    safe.write("\x1b]0;title\x07ok\n")
    assert tty.getvalue() == "\\x1b]0;title\\x07ok\n"
    pipe = io.StringIO()
    assert protect(pipe) is pipe  # pipes and files stay byte-exact


@pytest.mark.parametrize(
    ("space", "fields", "fragment"),
    [
        ("s", {"speaker": "fz-ctl\x1b[2J", "text": "x"}, "messages[0].speaker: holds the non-printable"),
        ("s", {"speaker": "A", "text": "a\ud800"}, "messages[0].text: holds a lone surrogate"),
        ("s", {"speaker": "A", "text": "w" * (MAX_TURN_CHARS + 1)}, "messages[0].text: is 100,001 characters"),
        ("s", {"speaker": "A", "text": "x", "id": "a\nb"}, "messages[0].id"),
        ("s", {"speaker": "A", "text": "x", "time": "0005-01-01"}, "messages[0].time: lies in year 5"),
        ("s\u202e", {"speaker": "A", "text": "x"}, "space 's\\u202e': holds the non-printable"),
    ],
)
def test_messages_from_agents_meet_the_same_limits(space: str, fields: dict[str, Any], fragment: str) -> None:
    from datetime import timedelta

    from tmem.ingest.messages import MessageInput, add_messages

    store = SQLiteStore.open(":memory:")
    with pytest.raises(InputError) as info:
        add_messages(store, Scope.local(space), [MessageInput(**fields)], gap=timedelta(hours=1))
    assert fragment in str(info.value)
    assert store.list_spaces() == []
    store.close()


def test_message_time_outside_the_utc_calendar_is_an_input_error() -> None:
    from datetime import datetime, timedelta, timezone

    from pydantic import ValidationError

    from tmem.ingest.messages import MessageInput

    with pytest.raises(ValidationError, match="outside years 1-9999"):
        MessageInput(speaker="A", text="x", time=datetime(1, 1, 1, tzinfo=timezone(timedelta(hours=1))))
