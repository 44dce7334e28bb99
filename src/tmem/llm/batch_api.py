"""Hands-off batch rounds: pending requests through the OpenAI Batch API (``/v1/files`` and ``/v1/batches``).

One round (:meth:`BatchAPIRunner.run_round`):

1. export every pending request (:func:`tmem.llm.batch.export_pending`) to ``WORK/round-<n>.jsonl``;
2. upload it (``files.create(purpose="batch")``) and **record** the input file id in the store before anything is
   paid for;
3. create the batch (``batches.create``, endpoint ``/v1/chat/completions``, window 24h) and record its id;
4. poll with backoff (``poll_initial`` seconds, doubling to ``poll_max``) until the batch is terminal, reporting
   progress (completed / failed / total);
5. download the output and error files to ``WORK/<batch id>.output.jsonl`` / ``.errors.jsonl`` and import them
   (:func:`tmem.llm.batch.import_results`) in one transaction with forgetting the record.

The record lives in the build state (``store.set_state``) of every space that had a request in the round, under
``llm.batch_api.<input file id>``, while the requests are pending. A killed process that is started again finds it
(:meth:`BatchAPIRunner.resume`) and waits for that batch instead of submitting its requests again; a record holding
only an input file id (killed between the upload and the answer to ``batches.create``) is matched to the batch the
server has for that file (``batches.list``), or submitted then. So no request is paid twice, whenever the process dies.

Terminal states: ``completed`` and ``expired`` import what came back (the expired requests stay pending for the next
round); ``cancelled`` (by someone, e.g. on the provider's dashboard, or ``tmem llm batch-cancel``) imports what
completed and stops with :class:`tmem.errors.LLMError`: a person asked it to stop; ``failed`` (the file was rejected)
stops with the server's reasons. A round that brings back no result at all stops too, instead of resubmitting the same
requests forever.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

import openai
from pydantic import BaseModel

from tmem.errors import BatchPending, LLMError, LLMTransientError
from tmem.llm.batch import BadLine, export_pending, import_results
from tmem.scope import Scope
from tmem.settings import Settings
from tmem.store.base import Store

STATE_PREFIX = "llm.batch_api."
TERMINAL = frozenset({"completed", "expired", "cancelled", "failed"})
_TRANSIENT = (openai.APIConnectionError, openai.APITimeoutError, openai.InternalServerError, openai.RateLimitError)
_MAX_POLL_ERRORS = 10  # consecutive transport errors while polling before giving up (the batch keeps running)

Echo = Callable[[str], None]
T = TypeVar("T")


class BatchRecord(BaseModel):
    """A submitted round, persisted until its results are imported."""

    input_file_id: str
    batch_id: str | None = None
    requests: int
    submitted_at: str  # bookkeeping time (never a memory date)


class RoundReport(BaseModel):
    batch_id: str
    status: str
    requests: int
    imported: int = 0
    already_imported: int = 0
    failed: list[BadLine] = []
    still_pending: int = 0
    input_tokens: int = 0
    output_tokens: int = 0


@dataclass
class BatchAPIOptions:
    poll_initial: float = 10.0
    poll_max: float = 300.0
    work_dir: Path = field(default_factory=lambda: Path("batches"))


def batch_client(settings: Settings) -> openai.OpenAI:
    """The synchronous SDK client for files and batches, from the same settings as the chat backend."""
    return openai.OpenAI(
        base_url=settings.llm_base_url,
        api_key=settings.llm_api_key or "not-needed",
        timeout=settings.llm_timeout,
        max_retries=0,  # transport errors are handled here: a retried batches.create could pay twice
    )


class BatchAPIRunner:
    """Submits batch rounds and waits for them; see the module docstring."""

    def __init__(
        self,
        store: Store,
        client: openai.OpenAI,
        options: BatchAPIOptions | None = None,
        *,
        echo: Echo | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.store = store
        self.client = client
        self.options = options or BatchAPIOptions()
        self._echo = echo or (lambda _: None)
        self._sleep = sleep
        self.rounds: list[RoundReport] = []

    # ------------------------------------------------------------------ records
    def in_flight(self) -> list[BatchRecord]:
        """Rounds submitted and not imported yet (by a process that may have been killed)."""
        found: dict[str, BatchRecord] = {}
        for space in sorted({p.space for p in self.store.pending()}):
            for value in self.store.state_keys(Scope.local(space), STATE_PREFIX).values():
                record = BatchRecord.model_validate_json(value)
                known = found.get(record.input_file_id)
                if known is None or (known.batch_id is None and record.batch_id is not None):
                    found[record.input_file_id] = record
        return sorted(found.values(), key=lambda r: r.submitted_at)

    def _save(self, record: BatchRecord, spaces: list[str]) -> None:
        with self.store.transaction():
            for space in spaces:
                self.store.set_state(Scope.local(space), STATE_PREFIX + record.input_file_id, record.model_dump_json())

    def _forget(self, record: BatchRecord, spaces: list[str]) -> None:
        for space in spaces:
            self.store.set_state(Scope.local(space), STATE_PREFIX + record.input_file_id, None)

    def _spaces_of(self, record: BatchRecord) -> list[str]:
        key = STATE_PREFIX + record.input_file_id
        spaces = sorted({p.space for p in self.store.pending()})
        return [s for s in spaces if self.store.get_state(Scope.local(s), key) is not None]

    # ------------------------------------------------------------------ rounds
    def resume(self) -> list[RoundReport]:
        """Wait for and import every round a previous process submitted; returns their reports."""
        reports = []
        for record in self.in_flight():
            self._echo(
                f"Resuming batch {record.batch_id or '(not created yet)'} of {record.requests} request(s) "
                f"submitted {record.submitted_at}."
            )
            reports.append(self._finish(record))
        return reports

    def run_round(self) -> RoundReport | None:
        """Submit every pending request as one batch, wait for it, import its results; None when nothing is
        pending. Finishes recorded rounds first (a restart), so nothing is submitted twice."""
        resumed = self.resume()
        if resumed:
            return resumed[-1]
        work = self.options.work_dir
        work.mkdir(parents=True, exist_ok=True)
        spaces = sorted({p.space for p in self.store.pending()})
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S%f")
        path = work / f"round-{stamp}.jsonl"
        count = export_pending(self.store, path)
        if count == 0:
            return None
        with path.open("rb") as handle:
            uploaded = self._call(
                "upload the batch file", lambda: self.client.files.create(file=handle, purpose="batch")
            )
        record = BatchRecord(input_file_id=uploaded.id, requests=count, submitted_at=_now())
        self._save(record, spaces)  # before the batch exists: a restart finds the file and never uploads it again
        batch = self._create(record)
        record = record.model_copy(update={"batch_id": batch.id})
        self._save(record, spaces)
        self._echo(f"Submitted batch {batch.id}: {count} request(s) from {len(spaces)} space(s) ({path}).")
        return self._finish(record)

    def cancel(self) -> list[str]:
        """Ask the server to cancel every recorded round; returns the batch ids. The next run imports what completed."""
        ids = []
        for record in self.in_flight():
            if record.batch_id is not None:
                self._call("cancel the batch", partial(self.client.batches.cancel, record.batch_id))
                ids.append(record.batch_id)
        return ids

    def _create(self, record: BatchRecord) -> Any:
        def attempt() -> Any:
            try:
                return self.client.batches.create(
                    input_file_id=record.input_file_id,
                    endpoint="/v1/chat/completions",  # BATCH_URL, as the SDK's literal type names it
                    completion_window="24h",  # the only window the API offers
                    metadata={"tmem": "build round"},
                )
            except _TRANSIENT:
                # The server may have created it before the connection broke: look before creating another.
                adopted = self._created_for(record.input_file_id)
                if adopted is not None:
                    return adopted
                raise

        return self._call("create the batch", attempt)

    def _created_for(self, input_file_id: str) -> Any | None:
        page = self._call("list batches", lambda: self.client.batches.list(limit=100))
        for batch in page.data:
            if batch.input_file_id == input_file_id:
                return batch
        return None

    def _finish(self, record: BatchRecord) -> RoundReport:
        if record.batch_id is None:  # killed between upload and create: the server may hold the batch anyway
            batch = self._created_for(record.input_file_id) or self._create(record)
            record = record.model_copy(update={"batch_id": batch.id})
            self._save(record, self._spaces_of(record))
        assert record.batch_id is not None
        batch = self._wait(record.batch_id)
        report = self._import(record, batch)
        self.rounds.append(report)
        self._echo(
            f"Batch {report.batch_id} {report.status}: {report.imported} result(s) imported, {len(report.failed)} "
            f"failed, {report.still_pending} request(s) pending; {report.input_tokens:,} input and "
            f"{report.output_tokens:,} output tokens."
        )
        if batch.status == "failed":
            reasons = (
                "; ".join(
                    f"line {e.line}: {e.message}" if e.line else str(e.message) for e in (batch.errors.data or [])
                )
                if batch.errors
                else "no reason given"
            )
            raise LLMError(f"Batch {batch.id} failed validation ({reasons}). Nothing was run; fix and rerun.")
        if batch.status == "cancelled":
            raise LLMError(
                f"Batch {batch.id} was cancelled: {report.imported} completed result(s) were imported. Rerun the same "
                "command to submit the remaining requests."
            )
        if report.imported == 0 and report.already_imported == 0:
            first = report.failed[0].reason if report.failed else "the output file was empty"
            raise LLMError(
                f"Batch {batch.id} ({batch.status}) brought back no result ({first}); not resubmitting the same "
                "requests. Check the model name and the requests, then rerun."
            )
        return report

    def _wait(self, batch_id: str) -> Any:
        delay = self.options.poll_initial
        errors = 0
        while True:
            try:
                batch = self.client.batches.retrieve(batch_id)
                errors = 0
            except _TRANSIENT as exc:
                errors += 1
                if errors > _MAX_POLL_ERRORS:
                    raise LLMTransientError(
                        f"Polling batch {batch_id} failed {errors} times in a row ({exc}). The batch keeps running: "
                        "rerun the command to resume waiting for it."
                    ) from exc
                self._sleep(delay)
                delay = min(self.options.poll_max, delay * 2)
                continue
            except openai.APIStatusError as exc:
                raise LLMError(f"Polling batch {batch_id}: HTTP {exc.status_code}: {_message(exc)}") from exc
            if batch.status in TERMINAL:
                return batch
            counts = batch.request_counts
            done = f"{counts.completed}/{counts.total} done, {counts.failed} failed" if counts else "no counts yet"
            self._echo(f"Batch {batch_id} {batch.status}: {done}; next check in {delay:.0f}s.")
            self._sleep(delay)
            delay = min(self.options.poll_max, delay * 2)

    def _import(self, record: BatchRecord, batch: Any) -> RoundReport:
        assert record.batch_id is not None
        work = self.options.work_dir
        work.mkdir(parents=True, exist_ok=True)
        files = []
        for kind, file_id in (("output", batch.output_file_id), ("errors", batch.error_file_id)):
            if file_id:
                path = work / f"{record.batch_id}.{kind}.jsonl"
                content = self._call(f"download the {kind} file", partial(self.client.files.content, file_id))
                path.write_bytes(content.content)
                files.append(path)
        before = _batch_tokens(self.store)
        report = RoundReport(batch_id=record.batch_id, status=batch.status, requests=record.requests)
        spaces = self._spaces_of(record)
        with self.store.transaction():  # the results and forgetting the record: both or neither
            for path in files:
                part = import_results(self.store, path)
                report.imported += part.imported
                report.already_imported += part.already_imported
                report.failed += [b.model_copy(update={"reason": f"{path.name}: {b.reason}"}) for b in part.bad]
            self._forget(record, spaces)
        after = _batch_tokens(self.store)
        report.input_tokens, report.output_tokens = after[0] - before[0], after[1] - before[1]
        report.still_pending = len(self.store.pending())
        return report

    def _call(self, what: str, fn: Callable[[], Any]) -> Any:
        failures = 0
        while True:
            try:
                return fn()
            except _TRANSIENT as exc:
                failures += 1
                if failures > _MAX_POLL_ERRORS:
                    raise LLMTransientError(f"Could not {what} after {failures} tries: {exc}") from exc
                self._sleep(min(self.options.poll_max, self.options.poll_initial * 2**failures))
            except openai.APIStatusError as exc:
                raise LLMError(f"Could not {what}: HTTP {exc.status_code}: {_message(exc)}") from exc


def _batch_tokens(store: Store) -> tuple[int, int]:
    calls = [c for c in store.llm_calls() if c.outcome == "batch"]
    return sum(c.tokens_in for c in calls), sum(c.tokens_out for c in calls)


def _message(exc: openai.APIStatusError) -> str:
    body = exc.body
    if isinstance(body, dict):
        error = body.get("error", body)
        if isinstance(error, dict) and error.get("message"):
            return str(error["message"])
    return str(exc.message)


def _now() -> str:
    return datetime.now(UTC).replace(tzinfo=None).isoformat(timespec="seconds")


def until_done(run: Callable[[], T], runner: BatchAPIRunner) -> T:
    """Call ``run`` (a build or an evaluation in batch mode) until it stops raising BatchPending, with a batch round
    through ``runner`` between calls. Rounds a killed process left are waited for first."""
    runner.resume()
    while True:
        try:
            return run()
        except BatchPending:
            if runner.run_round() is None:  # nothing pending after all: a stage raised without queueing
                raise
