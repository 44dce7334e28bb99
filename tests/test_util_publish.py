"""publish_folder: a save appears whole or not at all, a failed write leaves nothing behind, a slot keeps one save."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tmem.util.publish import publish_folder


def _writer(text: str) -> Callable[[Path], None]:
    def write(tmp: Path) -> None:
        (tmp / "data").write_text(text, encoding="utf-8")

    return write


def test_a_slot_keeps_its_newest_save_and_the_first_copy_of_a_save(tmp_path: Path) -> None:
    slot = tmp_path / "slot"
    publish_folder(slot / "a", _writer("first"))
    publish_folder(slot / "a", _writer("second"))
    assert (slot / "a" / "data").read_text(encoding="utf-8") == "first"  # the same save published twice: one kept
    publish_folder(slot / "b", _writer("newer"))
    assert sorted(p.name for p in slot.iterdir()) == ["b"]


def test_a_failed_write_leaves_no_folder(tmp_path: Path) -> None:
    slot = tmp_path / "slot"
    publish_folder(slot / "a", _writer("kept"))

    def broken(tmp: Path) -> None:
        (tmp / "data").write_text("half", encoding="utf-8")
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        publish_folder(slot / "b", broken)
    assert sorted(p.name for p in slot.iterdir()) == ["a"]  # no temporary folder, the older save untouched
