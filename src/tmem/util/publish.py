"""Publishing a folder atomically into a slot of a local cache (saved BM25 indices, saved IVF parts): the content is
written into a temporary sibling and renamed into place, so a concurrent reader sees a whole save or none."""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path


def publish_folder(folder: Path, write: Callable[[Path], None]) -> None:
    """Create ``folder`` by ``write(tmp)`` into a temporary folder beside it, renamed into place; then remove the other
    saves of its slot (the parent: one live save per slot). When another process published the same folder first,
    its copy is kept. An error of ``write`` propagates, the temporary folder removed."""
    slot = folder.parent
    slot.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".tmp-", dir=slot))
    try:
        write(tmp)
        with contextlib.suppress(OSError):  # another worker published the same save first: theirs is as good
            os.rename(tmp, folder)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)  # gone already after a successful rename
    for other in slot.iterdir():
        if other.name != folder.name and not other.name.startswith(".tmp-"):
            shutil.rmtree(other, ignore_errors=True)
