"""The refresh pipeline — one function, two callers (a refresh operation and the dry run).

``plan`` (mode, scope, snapshot cutoff, exclusions) → ``precheck`` (anything in reach? if not,
complete without an LLM request, RF-2) → ``gather`` (the reflect agent loop under the wall
timeout, RF-9) → ``decide`` (outcome and guards: an empty answer or one citing nothing never
overwrites, RF-3/RF-5) → ``extract`` (structured output from the final document, RF-7) →
``persist`` (one fenced transaction: document, watermark, timestamps, reflect_response,
version history, the operation's completion) — or, for the dry run, ``preview`` instead of
``persist`` (SPEC section 5).

The watermark stored is the newest ``updated_at`` in the model's scope visible at the snapshot
cutoff (RF-1): the write clock guarantees every memory stamped at or before the cutoff had
committed when it was taken, so the refresh could read it, and every later write is stamped
after the cutoff and stays "newer" for the next refresh. It is never ``now()``.

A failed attempt raises ``RefreshFailed`` (an ``OperationFailure`` carrying the client's
``details`` and the trace); nothing of the model is written by the attempt itself. The handler
(``mentalmodels.handlers``) records the failure entry and, after the last retry, the pause.

Delta mode (DL-*) is a later issue: a delta refresh falls back to full when the model has no
content or its source query changed (DL-5); otherwise it fails as
``refresh_failed_delta_not_applied`` instead of silently rewriting the document.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from datetime import datetime
from typing import TYPE_CHECKING, Any

import jsonschema
from django.db import DatabaseError, connection, transaction

from hindsight.banks import writeclock
from hindsight.db import ClockTimestamp
from hindsight.embeddings import get_embedder
from hindsight.errors import LLMNotConfigured, NotFound
from hindsight.llm import Deadline, LLMError, LLMTimeout, get_llm
from hindsight.tagscope import scope_sql
from mentalmodels.awaiting_llm import llm_missing_message
from mentalmodels.errors import REFRESH_OPERATION, DryRunFailed, RefreshFailed
from mentalmodels.models import MentalModel
from mentalmodels.reflect import RetrievalError, mm_search, reflect_run
from mentalmodels.reflect.mm_search import content_hash, embedding_text
from mentalmodels.refresh_types import Outcome, Plan, Preview, Report
from mentalmodels.services import history_record_version
from mentalmodels.staleness import model_scope, stale_flags
from mentalmodels.trace import RefreshClock, build_trace
from operations.errors import FenceLost

if TYPE_CHECKING:
    from operations.jobs import Job

OPERATION_TYPE = REFRESH_OPERATION
BASED_ON_KEYS = ("world", "experience", "opinion", "observation", "mental-models", "directives")
NOTHING_READABLE = (
    "Nothing in this document's scope was readable, so the reflect loop was skipped and the "
    "document left as it is. Check the resolved scope — tags, tag_groups and fact_types all "
    "narrow it — and whether the bank holds memories that match it."
)
NOTHING_CITED = (
    "The reflect loop answered without citing any memory or mental model, so the document "
    "was left as it is and only the watermark advanced."
)


# ---------------------------------------------------------------------------------------------
# plan


def _plan(model: MentalModel, *, mode: str | None) -> Plan:
    trigger = model.trigger or {}
    requested = "full" if mode == "full" else (trigger.get("mode") or "full")
    effective, fallback = requested, None
    if requested == "delta":
        if not (model.content or "").strip():
            effective, fallback = "full", "no_baseline_content"
        elif (
            model.last_refresh_source_query is not None
            and model.last_refresh_source_query != model.source_query
        ):
            effective, fallback = "full", "source_query_changed"
    exclude_ids = list(dict.fromkeys([*(trigger.get("exclude_mental_model_ids") or []),
                                      model.mental_model_id]))
    return Plan(
        model=model,
        requested_mode=requested,
        effective_mode=effective,
        mode_fallback_reason=fallback,
        scope=model_scope(model),
        cutoff=writeclock.take_cutoff(model.bank_id),
        window_after=model.last_memory_seen_at if effective == "delta" else None,
        exclude_mental_models=bool(trigger.get("exclude_mental_models")),
        exclude_ids=exclude_ids,
        budget=trigger.get("budget") or "mid",
        response_schema=trigger.get("response_schema"),
        keep_trace=bool(trigger.get("keep_trace")),
    )


# ---------------------------------------------------------------------------------------------
# precheck


def _newest_in_scope(plan: Plan, *, after: datetime | None) -> datetime | None:
    """The newest ``updated_at`` in the model's (recall) scope at or before the cutoff."""
    where, params = scope_sql(plan.scope, alias="m")
    sql = (
        "SELECT MAX(m.updated_at) FROM banks_memoryunit m "
        f"WHERE m.bank_id = %s AND m.updated_at <= %s {'AND m.updated_at > %s' if after else ''} "
        f"AND {where}"
    )
    args: list[Any] = [plan.model.bank_id, plan.cutoff, *([after] if after else []), *params]
    with connection.cursor() as cursor:
        cursor.execute(sql, args)
        (newest,) = cursor.fetchone()
    return newest


def _sibling_in_reach(plan: Plan) -> bool:
    if plan.exclude_mental_models or plan.effective_mode != "full":
        return False

    return (
        mm_search.visible_models(bank_id=plan.model.bank_id, scope=plan.scope, exclude_ids=plan.exclude_ids)
        .exclude(content="")
        .exists()
    )


# ---------------------------------------------------------------------------------------------
# gather, decide, extract


def _fail(
    message: str, *, outcome: str, reason: str, retryable: bool = True, timed_out: bool = False
) -> RefreshFailed:
    return RefreshFailed(message, outcome=outcome, failure_reason=reason, retryable=retryable,
                         timed_out=timed_out)


def _gather(plan: Plan, clock: RefreshClock) -> Any:
    clock.check()
    try:
        result = reflect_run(
            bank_id=plan.model.bank_id,
            query=plan.model.source_query,
            budget=plan.budget,
            max_tokens=plan.model.max_tokens,
            scope=plan.scope,
            cutoff=plan.cutoff,
            exclude_mental_model_ids=plan.exclude_ids,
            include_mental_models=not plan.exclude_mental_models,
            response_schema=None,
            deadline=Deadline(max(clock.remaining(), 0.001)),
            observations_max_tokens=(plan.model.trigger or {}).get(
                "reflect_search_observations_max_tokens"
            ),
        )
    except RetrievalError as exc:
        raise _fail(f"retrieval failed: {exc}", outcome="refresh_failed_error",
                    reason="retrieval_failed") from exc
    except LLMTimeout as exc:
        raise _fail(
            f"refresh exceeded HINDSIGHT_API_REFLECT_WALL_TIMEOUT "
            f"({clock.limit:g} s) waiting for the LLM: {exc}",
            outcome="refresh_failed_error", reason="unexpected_error", timed_out=True,
        ) from exc
    except LLMNotConfigured as exc:
        raise _fail(llm_missing_message(exc), outcome="refresh_failed_error",
                    reason="unexpected_error", retryable=False) from exc
    except LLMError as exc:
        raise _fail(f"LLM error: {type(exc).__name__}: {exc}", outcome="refresh_failed_error",
                    reason="unexpected_error") from exc
    clock.add_usage(result.usage)
    clock.llm_calls.extend(result.llm_calls)
    clock.tool_calls.extend(result.tool_calls)
    clock.tool_outputs.extend(getattr(result, "tool_outputs", []) or [])
    clock.warnings.extend(result.warnings)
    try:
        clock.check()
    except TimeoutError as exc:
        raise _fail(str(exc), outcome="refresh_failed_error", reason="unexpected_error",
                    timed_out=True) from exc
    return result


def _normalise_based_on(based_on: dict[str, Any] | None) -> dict[str, list[dict[str, Any]]]:
    based_on = based_on or {}
    return {key: list(based_on.get(key) or []) for key in BASED_ON_KEYS}


def _decide(plan: Plan, result: Any, watermark: datetime | None) -> Outcome:
    current = plan.model.content or ""
    candidate = (result.text or "").strip()
    based_on = _normalise_based_on(result.based_on)
    retrieved = Counter(ref.fact_type for ref in result.memories_read)
    models_seen = len(result.mental_models_used or [])
    if models_seen:
        retrieved["mental-models"] += models_seen
    used = Counter({k: len(v) for k, v in based_on.items() if v})
    cited = any(based_on[k] for k in BASED_ON_KEYS)
    if not candidate:
        raise _fail(
            "the reflect loop produced an empty answer; the document was left as it is",
            outcome="refresh_failed_empty_candidate", reason="empty_candidate",
        )
    if not cited:
        # RF-3: nothing relevant is an answer, but not one that may replace a document.
        return Outcome(
            outcome="content_preserved_no_new_facts", content=current, candidate=candidate,
            watermark=watermark, based_on=based_on, mental_models=[],
            reflected=True, facts_retrieved=dict(retrieved), facts_used=dict(used),
        )
    return Outcome(
        outcome="content_unchanged" if candidate == current else "content_written",
        content=candidate, candidate=candidate, watermark=watermark, based_on=based_on,
        mental_models=list(result.mental_models_used or []), reflected=True,
        facts_retrieved=dict(retrieved), facts_used=dict(used),
    )


_EXTRACT_PROMPT = (
    "You extract structured data from a document. Read the document and answer with a JSON "
    "object that matches the given schema exactly. Use only what the document says; when it "
    "says nothing about a required field, give the most faithful empty value of its type."
)


def _extract(plan: Plan, decided: Outcome, clock: RefreshClock) -> None:
    """RF-7: extract ``structured_output`` from the final document and validate it."""
    schema = plan.response_schema
    if not schema or not decided.content.strip():
        return

    failure = None
    try:
        clock.check()
        started = time.monotonic()
        answer = get_llm().structured(
            [
                {"role": "system", "content": _EXTRACT_PROMPT},
                {"role": "user", "content": f"Document:\n\n{decided.content}"},
            ],
            schema=schema,
            name="structured_output",
            # A user's schema need not meet strict mode's rules (every key required, no
            # additional properties); jsonschema validates the answer either way.
            strict=False,
            deadline=Deadline(max(clock.remaining(), 0.001)),
            purpose="mental_model_structured_output",
        )
        clock.add_usage(answer.usage)
        clock.llm_calls.append(
            {"scope": "structured_output",
             "duration_ms": int(getattr(answer, "duration_ms", 0) or (time.monotonic() - started) * 1000)}
        )
        jsonschema.validate(answer.data, schema)
    except jsonschema.ValidationError as exc:
        failure = f"structured output does not match trigger.response_schema: {exc.message}"
    except (LLMError, TimeoutError) as exc:
        failure = f"structured output could not be produced: {type(exc).__name__}: {exc}"
    if failure:
        raise _fail(failure, outcome="refresh_failed_structured_output",
                    reason="structured_output_failed")
    decided.structured_output = answer.data
    decided.structured_extracted = True


# ---------------------------------------------------------------------------------------------
# persist


def _embed(model: MentalModel, content: str) -> dict[str, Any]:
    """The new document's embedding, computed before the write transaction (no I/O inside)."""
    if not content.strip():
        return {}
    try:
        text = embedding_text(MentalModel(name=model.name, content=content))
        embedder = get_embedder()
        (vector,) = embedder.embed([text])
        profile = embedder.profile
    except Exception:  # reflect re-embeds lazily: a missing vector is not worth a failure
        return {}
    return {
        "embedding": vector,
        "embedding_model": profile.model,
        "embedding_dimensions": profile.dimensions,
        "embedding_content_hash": content_hash(text),
    }


def _based_on_counts(based_on: dict[str, list[Any]]) -> dict[str, int]:
    return {key: len(based_on.get(key) or []) for key in BASED_ON_KEYS}


def _persist(plan: Plan, decided: Outcome, trace: dict[str, Any], job: Job | None) -> None:
    content_changes = decided.content != (plan.model.content or "")
    embedding = _embed(plan.model, decided.content) if content_changes else {}
    details = {"operation_type": OPERATION_TYPE, "outcome": decided.outcome, "failure_reason": None}
    metadata = {
        "name": plan.model.name,
        "mental_model_id": plan.model.mental_model_id,
        "outcome": decided.outcome,
        "failure_reason": None,
        "content_len": len(decided.content),
        "based_on_counts": _based_on_counts(decided.based_on),
        "delta_ops_applied": 0,
        "delta_ops_skipped": 0,
        "populated_content": bool(decided.content),
        "effective_mode": plan.effective_mode,
        "mode_fallback_reason": plan.mode_fallback_reason,
        "reflected": decided.reflected,
    }
    if job is not None:
        job.details = details
        job.result_metadata = {**job.result_metadata, **metadata}
    with job.finishing() if job is not None else transaction.atomic():
        model = MentalModel.objects.select_for_update().filter(uid=plan.model.uid).first()
        if model is None:
            raise FenceLost(f"mental model {plan.model.mental_model_id} was deleted")
        previous_response = model.reflect_response
        fields = ["last_refreshed_at", "last_refresh_failed_at", "last_refresh_source_query",
                  "reflect_response", "updated_at"]
        model.last_refreshed_at = ClockTimestamp()
        model.last_refresh_failed_at = None
        model.last_refresh_source_query = model.source_query
        model.updated_at = ClockTimestamp()
        if plan.effective_mode == "full":
            model.last_full_refreshed_at = ClockTimestamp()
            fields.append("last_full_refreshed_at")
        if decided.watermark is not None:
            model.last_memory_seen_at = decided.watermark
            fields.append("last_memory_seen_at")
        if decided.reflected and decided.outcome in ("content_written", "content_unchanged"):
            response: dict[str, Any] = {
                "text": decided.candidate,
                "outcome": decided.outcome,
                "based_on": decided.based_on,
                "mental_models": decided.mental_models,
            }
        else:
            # The document stands, so does the record of what it rests on.
            response = dict(previous_response or {
                "text": "", "based_on": _normalise_based_on(None), "mental_models": [],
            })
            response["outcome"] = decided.outcome
        response.pop("trace", None)
        if plan.response_schema:
            if decided.structured_extracted:
                response["structured_output"] = decided.structured_output
            else:
                response.setdefault("structured_output", None)
        else:
            response.pop("structured_output", None)
        if plan.keep_trace:
            response["trace"] = trace
        model.reflect_response = response
        if content_changes:
            history_record_version(
                model=model,
                previous_content=model.content,
                previous_reflect_response=previous_response,
                operation_id=job.operation.id if job is not None else None,
            )
            model.content = decided.content
            model.document = None
            fields += ["content", "document"]
            for key, value in embedding.items():
                setattr(model, key, value)
            fields += list(embedding)
        model.save(update_fields=fields)


# ---------------------------------------------------------------------------------------------
# the pipeline


def _load(*, bank_id: str, mental_model_id: str) -> MentalModel | None:
    return MentalModel.objects.filter(bank_id=bank_id, mental_model_id=mental_model_id).first()


@contextmanager
def _retrieval(step: str) -> Iterator[None]:
    """RF-4: a database read of the snapshot or the precheck that raises is retrieval_failed."""
    try:
        yield
    except DatabaseError as exc:
        raise _fail(f"retrieval failed ({step}): {exc}", outcome="refresh_failed_error",
                    reason="retrieval_failed") from exc


def _run(
    model: MentalModel, *, mode: str | None, automatic: bool, clock: RefreshClock
) -> tuple[Plan, Outcome]:
    """plan → precheck → gather → decide → extract: everything but the write."""
    # The snapshot cutoff is the first read of the refresh (it bounds every later one): a
    # database that fails it fails retrieval, not the refresh in some unexplained way.
    with _retrieval("taking the snapshot cutoff"):
        plan = _plan(model, mode=mode)
    clock.plan = plan
    with _retrieval("reading the newest memory in scope"):
        newest = _newest_in_scope(plan, after=None)
        in_window = (
            newest if plan.window_after is None
            else _newest_in_scope(plan, after=plan.window_after)
        )
    watermark = newest if newest is not None else model.last_memory_seen_at
    preserved = Outcome(
        outcome="content_preserved_no_new_facts", content=model.content or "",
        candidate="", watermark=watermark, based_on={}, mental_models=[],
    )
    # An automatic run that asks for mode full is a due full_refresh_cron: a periodic rebuild
    # runs regardless of staleness (OP-5); every other automatic run re-checks it (OP-1).
    if automatic and mode != "full":
        with _retrieval("re-checking staleness"):
            stale = stale_flags([model])[model.uid]
        if not stale:
            # OP-1: the previous refresh already read everything this trigger was about.
            clock.warnings.append("The model was not stale when the automatic refresh started.")
            # Nothing was read, so the watermark stays where the last read left it: under
            # any/all the scope can hold untagged memories staleness ignores, and moving past
            # them would drop them from a later delta window (RF-1).
            return plan, replace(preserved, watermark=model.last_memory_seen_at)
    if in_window is None:
        with _retrieval("looking for sibling mental models in reach"):
            sibling = _sibling_in_reach(plan)
        if not sibling:
            clock.warnings.append(NOTHING_READABLE)
            return plan, preserved
    if plan.effective_mode == "delta":
        raise _fail(
            "delta refreshes are not available in this build; set trigger.mode to 'full' "
            "(the document was left as it is)",
            outcome="refresh_failed_delta_not_applied", reason="delta_not_applied",
            retryable=False,
        )
    result = _gather(plan, clock)
    decided = _decide(plan, result, watermark)
    if decided.outcome == "content_preserved_no_new_facts":
        clock.warnings.append(NOTHING_CITED)
    _extract(plan, decided, clock)
    return plan, decided


def refresh_run(
    *,
    bank_id: str,
    mental_model_id: str,
    mode: str | None = None,
    automatic: bool = False,
    job: Job | None = None,
) -> Report:
    """Refresh one model and persist the result (fenced through ``job`` when given).

    Raises ``RefreshFailed`` for a refused refresh (nothing written) and ``FenceLost`` when
    the model was deleted or edited meanwhile (MM-10).
    """
    model = _load(bank_id=bank_id, mental_model_id=mental_model_id)
    if model is None:
        # Deleted before this run started: superseded, nothing to write.
        raise FenceLost(f"mental model {mental_model_id} no longer exists in bank {bank_id}")
    clock = RefreshClock()
    try:
        plan, decided = _run(model, mode=mode, automatic=automatic, clock=clock)
        trace = build_trace(plan, clock, outcome=decided.outcome)
        _persist(plan, decided, trace, job)
    except RefreshFailed as exc:
        clock.warnings.append(str(exc))
        exc.trace = build_trace(clock.plan, clock, outcome=exc.outcome, failure_reason=exc.failure_reason,
                           error=str(exc))
        exc.result_metadata = {
            "name": model.name, "mental_model_id": model.mental_model_id,
            "outcome": exc.outcome, "failure_reason": exc.failure_reason,
        }
        raise
    except FenceLost:
        raise  # superseded: not a failed attempt, nothing to record
    except Exception as exc:
        # Cut short from outside (the engine's wall-timeout backstop, the task's soft limit) or
        # a bug: no finer reason than unexpected_error, but what the attempt did so far is still
        # its record (RF-11). The handler stores it as a RefreshFailed's trace.
        error = f"{type(exc).__name__}: {exc}"
        clock.warnings.append(error)
        try:
            exc.refresh_trace = build_trace(  # type: ignore[attr-defined]
                clock.plan, clock, outcome="refresh_failed_error",
                failure_reason="unexpected_error", error=error,
            )
        except Exception:  # an exception type without attributes: no trace, the failure stands
            pass
        raise
    return Report(plan=plan, outcome=decided, trace=trace, usage=dict(clock.usage),
                  duration_ms=clock.elapsed_ms(), warnings=list(clock.warnings),
                  tool_outputs=clock.tool_outputs)


def refresh_dry_run(*, bank_id: str, mental_model_id: str) -> Preview:
    """SPEC section 5: the same pipeline, with ``persist`` replaced by the preview."""
    model = _load(bank_id=bank_id, mental_model_id=mental_model_id)
    if model is None:
        raise NotFound(f"Mental model {mental_model_id} not found")
    clock = RefreshClock()
    try:
        plan, decided = _run(model, mode=None, automatic=False, clock=clock)
    except RefreshFailed as exc:
        if isinstance(exc.__cause__, LLMNotConfigured):
            # No refresh can run on this server at all: the same 400 as reflect, not a 502
            # (no LLM was asked, so nothing upstream failed).
            raise exc.__cause__ from None
        raise DryRunFailed.for_refusal(exc) from exc
    return Preview(
        model=model,
        plan=plan,
        outcome=decided,
        current_content=model.content or "",
        trace=build_trace(plan, clock, outcome=decided.outcome, with_outputs=True),
        usage=dict(clock.usage),
        duration_ms=clock.elapsed_ms(),
        warnings=list(clock.warnings),
    )
