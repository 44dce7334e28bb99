"""Store state keys that construction writes and the index, the CLI and checks read (kept below all of them)."""

from __future__ import annotations

STATE_MODE = "build.mode"  # "llm" or "extractive"
STATE_SESSIONS = "build.sessions"  # number of sessions covered by the last completed build (str(int))
STATE_TURN_SEQ = "build.turn_seq"  # highest turn seq the last completed build started from (staleness watermark)
STATE_EDITS = "memory.edits"  # counter bumped by every item edit or forget (search indices watch state keys)
STATE_FAILED = "build.failed"  # JSON list of the units the last build could not complete (see tmem.construct.report)
STATE_FALLBACK = "build.fallback"  # JSON {scene id: reason} of scenes segmented without the model (fallback)
