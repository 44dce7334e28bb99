"""Issue 20 (hostile run, round two), Low: `tmem check` reported `turn_unassigned` and exited 1 while a build was
rewriting a session (2 of 12 runs). Check now reads between builds: it holds the build lease, waiting for a running
build to end."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from tests.test_service import dev_messages
from tmem import Memory, Settings
from tmem.cli.check_cmds import EXIT_BUSY
from tmem.cli.main import cli
from tmem.construct.policy import build_lease
from tmem.scope import Scope


def _built(home: Path) -> Memory:
    mem = Memory.open(home, Settings(llm="none", embed_backend="hash"))
    for session in dev_messages(2):
        mem.add_messages("s", session)
    mem.build("s")
    return mem


def test_check_waits_for_a_build_rewriting_a_session(tmp_path: Path) -> None:
    home = tmp_path / "mem"
    mem = _built(home)
    store = mem.store
    scene = store.scenes(Scope.local("s"))[0]
    result: dict[str, Any] = {}

    def check() -> None:
        result["run"] = CliRunner().invoke(cli, ["--dir", str(home), "check", "s", "--json", "--wait", "60"])

    with build_lease(store, Scope.local("s"), 60):
        # A build between its transactions: the session's scene is rewritten, one of its turns not yet placed.
        store.put_scenes(Scope.local("s"), [scene.model_copy(update={"turn_ids": scene.turn_ids[:-1]})])
        thread = threading.Thread(target=check)
        thread.start()
        time.sleep(1.5)
        assert thread.is_alive() and "run" not in result  # waiting for the build, not reading its half-done state
        store.put_scenes(Scope.local("s"), [scene])  # the build's last write
    thread.join(60)
    run = result["run"]
    assert run.exit_code == 0, run.output
    assert '"ok": true' in run.output
    mem.close()


def test_check_gives_up_after_its_wait_and_says_so(tmp_path: Path) -> None:
    home = tmp_path / "mem"
    mem = _built(home)
    with build_lease(mem.store, Scope.local("s"), 60):
        run = CliRunner().invoke(cli, ["--dir", str(home), "check", "s", "--wait", "0.5"])
    assert run.exit_code == EXIT_BUSY, run.output  # neither "ok" (0) nor "violations" (1): busy
    assert "still running after 0.5 s" in run.output
    mem.close()
