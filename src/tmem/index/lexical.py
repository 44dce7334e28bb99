"""Persisted BM25 indices: a cold process loads a space's lexical index from disk instead of re-tokenising and
re-indexing every text (measured in bench/results/scale.md: at 20k and 50k documents loading takes about a
hundredth of a rebuild; PostgreSQL full-text search was both slower per query and a different ranking).

The store is content-addressed: an index is saved under the digest of its corpus (ids, texts, tokenizer and bm25s
versions), so a saved index is used only for exactly the corpus it was built from, whatever the store, backend or
process; any change to a text makes a new digest, a rebuild and a new save (the older save of the same slot is then
removed). It is a cache, never the source of truth: a missing, partial or unreadable save is rebuilt from the texts.
Saves are written to a temporary folder and renamed into place, so concurrent workers never read half a save.
"""

from __future__ import annotations

import hashlib
import json
import logging
import shutil
from collections.abc import Sequence
from pathlib import Path

from tmem.index.bm25 import TOKENIZER_VERSION, BM25Index, bm25s_version
from tmem.index.ivf_saves import space_folder
from tmem.scope import Scope
from tmem.util.publish import publish_folder

log = logging.getLogger(__name__)
_DONE = "complete.json"  # written last: a folder without it is not a save


CORPORA = ("nodes", "turns")  # a space's two BM25 corpora (node texts, raw turns)


def scope_of(space: Scope, corpus: str) -> str:
    """The slot name of one of a space's BM25 corpora."""
    return f"{space.key}/{corpus}"


def corpus_digest(ids: Sequence[str], texts: Sequence[str]) -> str:
    """Digest of a corpus as BM25 sees it (ids, texts, tokenizer and bm25s versions)."""
    h = hashlib.sha256(f"tmem-bm25|{TOKENIZER_VERSION}|{bm25s_version()}|{len(ids)}".encode())
    for ident, text in zip(ids, texts, strict=True):
        h.update(b"\x1e")
        h.update(ident.encode("utf-8", "surrogatepass"))
        h.update(b"\x1f")
        h.update(text.encode("utf-8", "surrogatepass"))
    return h.hexdigest()[:32]


class LexicalStore:
    """BM25 indices saved under ``root`` (one folder per slot, e.g. a space's node corpus, holding its latest save)."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self.loads = 0
        self.builds = 0

    def _slot(self, scope: str) -> Path:
        return self.root / hashlib.sha256(scope.encode("utf-8", "surrogatepass")).hexdigest()[:24]

    def index(self, scope: str, ids: Sequence[str], texts: Sequence[str]) -> BM25Index:
        """The BM25 index of (``ids``, ``texts``): loaded when a save of exactly this corpus exists, else built and
        saved. ``scope`` names the slot (e.g. ``space/nodes``) whose older save the new one replaces."""
        if not ids:
            return BM25Index.build(ids, texts)
        digest = corpus_digest(ids, texts)
        folder = self._slot(scope) / digest
        if (folder / _DONE).is_file():
            try:
                loaded = BM25Index.load(folder, ids)
            except (OSError, ValueError, KeyError) as exc:  # a damaged save: rebuild (the cache is not the truth)
                log.warning("Rebuilding the lexical index saved in %s: %s", folder, exc)
                shutil.rmtree(folder, ignore_errors=True)
            else:
                self.loads += 1
                return loaded
        built = BM25Index.build(ids, texts)
        self.builds += 1
        if built.has_terms:
            self._save(folder, built, scope)
        return built

    def drop(self, space: Scope) -> None:
        """Remove every save of ``space``, BM25 and IVF (after a forget or a delete: a save holds the vocabulary of
        its texts, an IVF save their vectors)."""
        for corpus in CORPORA:
            shutil.rmtree(self._slot(scope_of(space, corpus)), ignore_errors=True)
        shutil.rmtree(space_folder(self.root, space), ignore_errors=True)  # saved IVF parts hold its vectors

    def _save(self, folder: Path, index: BM25Index, scope: str) -> None:
        def write(tmp: Path) -> None:
            index.save(tmp)
            (tmp / _DONE).write_text(json.dumps({"scope": scope, "documents": len(index)}), encoding="utf-8")

        try:
            publish_folder(folder, write)
        except OSError as exc:
            # An unwritable cache costs a rebuild at the next load, nothing else: searches must not fail over it.
            log.warning("Could not save the lexical index in %s (%s): the next load rebuilds it.", folder.parent, exc)
