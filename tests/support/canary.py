"""Which files under a memory directory still hold a canary, scanned while servers may be writing there."""

from __future__ import annotations

import time
from pathlib import Path

from tmem.edit.forget import canary_free


def files_holding(root: Path, canary: str, *, settle_s: float = 10.0) -> list[str]:
    """Files under ``root`` holding ``canary`` as written or as BM25's vocabulary holds it (lower case).

    A server saving its indices replaces folders and files while the scan walks them; a scan that meets a path gone
    from under it (FileNotFoundError) has seen no consistent tree, so it starts again, for ``settle_s`` at most.
    """
    forms = (canary, canary.lower())
    deadline = time.monotonic() + settle_s
    while True:
        try:
            return sorted(
                str(p)
                for p in root.rglob("*")
                if p.is_file() and not all(canary_free(p.read_bytes(), f) for f in forms)
            )
        except FileNotFoundError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)
