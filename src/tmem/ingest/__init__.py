"""Ingest: conversation files (LoCoMo JSON, native JSON/JSONL) -> validated sessions -> the store.

Public entry points: :func:`read_file` (pure), :func:`import_file`, :func:`import_sessions`, the native writers
:func:`dump_native` / :func:`dump_native_lines`, and :func:`parse_timestamp`. See docs/ingest.md.
"""

from __future__ import annotations

from tmem.ingest.importer import import_file, import_sessions, import_spaces, session_content_hash
from tmem.ingest.native import dump_native, dump_native_lines
from tmem.ingest.reader import FORMATS, Format, read_file
from tmem.ingest.timestamps import format_locomo, parse_timestamp
from tmem.ingest.types import ImportReport, SpaceImportReport, SpaceInput

__all__ = [
    "FORMATS",
    "Format",
    "ImportReport",
    "SpaceImportReport",
    "SpaceInput",
    "dump_native",
    "dump_native_lines",
    "format_locomo",
    "import_file",
    "import_sessions",
    "import_spaces",
    "parse_timestamp",
    "read_file",
    "session_content_hash",
]
