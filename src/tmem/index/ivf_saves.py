"""Saved IVF parts: a fresh process restores a large part of the in-process index from disk instead of reading its
vectors from the store and training its IVF again (86 s at 1M views on a 2-core box, bench/results/scale.md).

Like the saved BM25 indices (:mod:`tmem.index.lexical`), the saves are a content-addressed cache beside them
(``<lexical dir>/ivf/``): a part is saved under the digest of its entries (ids, hosts, views, text hashes, in part
order) and the embedder, so a save is used only for exactly the entries and model it was built from; a build that
changes the part makes a new digest and a new save, which replaces the slot's older one. A missing or damaged save
costs the full load, never a failed search. Saves are written to a temporary folder and renamed into place.
A save holds the part's vectors: ``LexicalStore.drop`` removes a space's IVF saves with its BM25 saves (forget,
delete).
"""

from __future__ import annotations

import hashlib
import json
import logging
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from tmem.index.ivf import IvfPart, faiss_module
from tmem.scope import Scope
from tmem.util.publish import publish_folder

if TYPE_CHECKING:
    from tmem.index.backend import Entry

log = logging.getLogger(__name__)
_DONE = "complete.json"  # written last: a folder without it is not a save
_FORMAT = 1


def space_folder(root: Path, space: Scope) -> Path:
    """Where the IVF saves of ``space`` live under a saved-index root."""
    return Path(root) / "ivf" / hashlib.sha256(space.key.encode("utf-8", "surrogatepass")).hexdigest()[:24]


def part_digest(model_id: str, dim: int, part: str, entries: Sequence[Entry]) -> str:
    """Digest of one part's entries (in part order) for one embedder."""
    h = hashlib.sha256(f"tmem-ivf|{_FORMAT}|{model_id}|{dim}|{part}|{len(entries)}".encode())
    for e in entries:
        h.update("\x1e".join((e.id, e.host, e.view, e.text_hash)).encode("utf-8", "surrogatepass"))
        h.update(b"\x1d")
    return h.hexdigest()[:32]


class IvfSaves:
    """The IVF saves of one space for one embedder under ``root`` (one slot folder per part)."""

    def __init__(self, root: Path, space: Scope, model_id: str) -> None:
        self.folder = space_folder(root, space)
        self.model_id = model_id
        self.loads = 0
        self.saves = 0

    def _slot(self, part: str) -> Path:
        return self.folder / hashlib.sha256(f"{self.model_id}|{part}".encode()).hexdigest()[:24]

    def load(self, dim: int, part: str, entries: Sequence[Entry]) -> IvfPart | None:
        """The saved IVF of exactly these entries (part order), or None."""
        folder = self._slot(part) / part_digest(self.model_id, dim, part, entries)
        if not (folder / _DONE).is_file():
            return None
        try:
            trained_on = int(json.loads((folder / _DONE).read_text(encoding="utf-8"))["trained_on"])
            keys = np.load(folder / "keys.npy")
            if keys.shape != (len(entries),) or keys.dtype.kind != "i":
                raise ValueError(f"keys of shape {keys.shape} and type {keys.dtype} for {len(entries)} entries")
            # keys grow past the entry count only through removals between retrainings; far past it is damage
            if len(keys) and (
                keys.min() < 0 or keys.max() >= 16 * len(keys) + 1024 or len(np.unique(keys)) != len(keys)
            ):
                raise ValueError("keys out of range or repeated")
            index = faiss_module().read_index(str(folder / "ivf.faiss"))
            if index.ntotal != len(entries) or index.d != dim:
                raise ValueError(f"index of {index.ntotal} x {index.d} for {len(entries)} x {dim}")
        except (OSError, ValueError, KeyError, TypeError, RuntimeError) as exc:  # faiss: RuntimeError
            log.warning("Ignoring the damaged IVF save in %s (%s): the part is built again.", folder, exc)
            shutil.rmtree(folder, ignore_errors=True)
            return None
        self.loads += 1
        return IvfPart.restore(dim, index, entries, keys.tolist(), trained_on)

    def save(self, part: str, entries: Sequence[Entry], ivf: IvfPart) -> None:
        """Save ``ivf`` (holding exactly ``entries``, part order) unless this digest is saved already."""
        slot = self._slot(part)
        folder = slot / part_digest(self.model_id, ivf.dim, part, entries)
        if (folder / _DONE).is_file():
            return
        keys = np.asarray([ivf.pos[e.id] for e in entries], dtype=np.int64)

        def write(tmp: Path) -> None:
            faiss_module().write_index(ivf.index, str(tmp / "ivf.faiss"))
            np.save(tmp / "keys.npy", keys)
            (tmp / _DONE).write_text(json.dumps({"part": part, "trained_on": ivf.trained_on}), encoding="utf-8")

        try:
            publish_folder(folder, write)
            self.saves += 1
        except (OSError, RuntimeError) as exc:
            # An unwritable cache costs a full load next time, nothing else: searches must not fail over it.
            log.warning("Could not save the IVF part in %s (%s): the next load builds it again.", slot, exc)
