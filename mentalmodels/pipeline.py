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

Delta mode (DL-*): the reflect loop reads only the window ``(watermark, cutoff]`` (its memory
tools; mental models are searched whatever their age), then a second LLM call is shown the topic,
the current document with its ids (``mentalmodels.document``) and the facts the answer cited —
the facts themselves with their dates, oldest first, never the loop's synthesis — and answers
with operations (``mentalmodels.delta``). Every operation dropped, or an answer that cannot be
read: asked once more with the wrong ids and the ids the document has. What cannot be applied
fails the attempt (retryable; content, document and window untouched). A delta refresh falls
back to full only when the model has no content or its source query changed since the last
successful refresh (DL-5). ``based_on`` accumulates across delta refreshes (RF-8).
"""

from __future__ import annotations

import json
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
from hindsight.banks.budget import bank_budget_require
from hindsight.db import ClockTimestamp
from hindsight.embeddings import get_embedder
from hindsight.errors import LLMNotConfigured, NotFound
from hindsight.llm import Deadline, LLMError, LLMOutputError, LLMTimeout, get_llm
from hindsight.llm.context import llm_context
from hindsight.tagscope import scope_sql
from mentalmodels.awaiting_llm import llm_missing_message
from mentalmodels.delta import ANSWER_SCHEMA, DeltaResult, apply_operations
from mentalmodels.document import Document, document_for, render, render_json, split
from mentalmodels.errors import DryRunFailed, RefreshFailed, RefreshInterrupted
from mentalmodels.failure_class import FAILURE_FIELDS, failure_record_clear
from mentalmodels.models import MentalModel
from mentalmodels.reflect import RetrievalError, mm_search, reflect_run
from mentalmodels.reflect.mm_search import content_hash, embedding_text
from mentalmodels.refresh_types import (
    MentalModelOperationType,
    ModeFallbackReason,
    Outcome,
    Plan,
    Preview,
    RefreshFailureReason,
    RefreshMode,
    RefreshOutcome,
    Report,
)
from mentalmodels.services import history_record_version
from mentalmodels.staleness import model_scope, stale_flags
from mentalmodels.trace import RefreshClock, bounded_ops, build_trace
from operations.errors import FenceLost

if TYPE_CHECKING:
    from operations.jobs import Job

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
    full = RefreshMode.FULL
    requested = full if mode == full else (trigger.get("mode") or full)
    effective, fallback = requested, None
    if requested == RefreshMode.DELTA:
        if not (model.content or "").strip():
            effective, fallback = full, ModeFallbackReason.NO_BASELINE_CONTENT
        elif (
            model.last_refresh_source_query is not None
            and model.last_refresh_source_query != model.source_query
        ):
            effective, fallback = full, ModeFallbackReason.SOURCE_QUERY_CHANGED
    exclude_ids = list(dict.fromkeys([*(trigger.get("exclude_mental_model_ids") or []),
                                      model.mental_model_id]))
    return Plan(
        model=model,
        requested_mode=requested,
        effective_mode=effective,
        mode_fallback_reason=fallback,
        scope=model_scope(model),
        cutoff=writeclock.take_cutoff(model.bank_id),
        window_after=model.last_memory_seen_at if effective == RefreshMode.DELTA else None,
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
    if plan.exclude_mental_models or plan.effective_mode != RefreshMode.FULL:
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
            updated_after=plan.window_after,
            exclude_mental_model_ids=plan.exclude_ids,
            include_mental_models=not plan.exclude_mental_models,
            response_schema=None,
            deadline=Deadline(max(clock.remaining(), 0.001)),
            observations_max_tokens=(plan.model.trigger or {}).get(
                "reflect_search_observations_max_tokens"
            ),
        )
    except RetrievalError as exc:
        raise _fail(f"retrieval failed: {exc}", outcome=RefreshOutcome.REFRESH_FAILED_ERROR,
                    reason=RefreshFailureReason.RETRIEVAL_FAILED) from exc
    except LLMTimeout as exc:
        raise _fail(
            f"refresh exceeded HINDSIGHT_API_REFLECT_WALL_TIMEOUT "
            f"({clock.limit:g} s) waiting for the LLM: {exc}",
            outcome=RefreshOutcome.REFRESH_FAILED_ERROR,
            reason=RefreshFailureReason.UNEXPECTED_ERROR, timed_out=True,
        ) from exc
    except LLMNotConfigured as exc:
        raise _fail(llm_missing_message(exc), outcome=RefreshOutcome.REFRESH_FAILED_ERROR,
                    reason=RefreshFailureReason.UNEXPECTED_ERROR, retryable=False) from exc
    except LLMError as exc:
        raise _fail(f"LLM error: {type(exc).__name__}: {exc}", outcome=RefreshOutcome.REFRESH_FAILED_ERROR,
                    reason=RefreshFailureReason.UNEXPECTED_ERROR) from exc
    clock.add_usage(result.usage)
    clock.llm_calls.extend(result.llm_calls)
    clock.tool_calls.extend(result.tool_calls)
    clock.tool_outputs.extend(getattr(result, "tool_outputs", []) or [])
    clock.warnings.extend(result.warnings)
    try:
        clock.check()
    except TimeoutError as exc:
        raise _fail(str(exc), outcome=RefreshOutcome.REFRESH_FAILED_ERROR,
                    reason=RefreshFailureReason.UNEXPECTED_ERROR, timed_out=True) from exc
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
            outcome=RefreshOutcome.REFRESH_FAILED_EMPTY_CANDIDATE,
            reason=RefreshFailureReason.EMPTY_CANDIDATE,
        )
    if not cited:
        # RF-3: nothing relevant is an answer, but not one that may replace a document.
        return Outcome(
            outcome=RefreshOutcome.CONTENT_PRESERVED_NO_NEW_FACTS, content=current, candidate=candidate,
            watermark=watermark, based_on=based_on, mental_models=[],
            reflected=True, facts_retrieved=dict(retrieved), facts_used=dict(used),
        )
    return Outcome(
        outcome=RefreshOutcome.CONTENT_UNCHANGED if candidate == current
        else RefreshOutcome.CONTENT_WRITTEN,
        content=candidate, candidate=candidate, watermark=watermark, based_on=based_on,
        mental_models=list(result.mental_models_used or []), reflected=True,
        facts_retrieved=dict(retrieved), facts_used=dict(used),
    )


# ---------------------------------------------------------------------------------------------
# delta

DELTA_SYSTEM = """You maintain a long-lived markdown document by editing it, never by rewriting \
it. You are given the document's topic, the document as sections of blocks (each with its id), \
and new facts. Answer with the edit operations that bring the document up to date with the new \
facts, as {"operations": [...]}.

Operations (ids are the ones shown; never invent or reuse an id for another kind of thing):
- {"op": "append_block", "section_id": S, "markdown": M} — add a block at the end of section S
- {"op": "insert_block", "section_id": S, "after_block_id": B or null, "markdown": M}
- {"op": "replace_block", "section_id": S, "block_id": B, "markdown": M} — B must be in S
- {"op": "remove_block", "section_id": S, "block_id": B}
- {"op": "replace_section_blocks", "section_id": S, "blocks": [M, ...]}
- {"op": "add_section", "heading": H, "level": 1-6, "after_section_id": S or null, "blocks": [M]}
- {"op": "rename_section", "section_id": S, "heading": H}
- {"op": "remove_section", "section_id": S}

Rules:
- section_id is always a section's id (like "team"); block_id always a block's id (like \
"b-1a2b3c4d"). A block id is never a section id.
- A block's markdown is one paragraph, list, table or code fence, without headings. Edit the \
smallest block that changes; leave everything else alone. Do not restate what the document \
already says.
- The facts are listed oldest first. When facts disagree, the later one is the current state: \
never replace what the document says with an older fact than the one it rests on.
- If the new facts change nothing, answer {"operations": []}."""


def _fact_time(entry: dict[str, Any]) -> tuple[str, str]:
    """Event time (when it happened, else when it was said), then write time: the order in
    which the ops call must read facts so a later state comes last."""
    written = str(entry.get("updated_at") or "")
    event = str(entry.get("occurred_start") or entry.get("mentioned_at") or written)
    return event, written


def _window_facts(based_on: dict[str, list[dict[str, Any]]]) -> list[dict[str, Any]]:
    facts = [e for key in BASED_ON_KEYS if key not in ("mental-models", "directives")
             for e in based_on.get(key) or []]
    return sorted(facts, key=_fact_time)


def _facts_text(facts: list[dict[str, Any]]) -> str:
    lines = []
    for index, fact in enumerate(facts, 1):
        event, written = _fact_time(fact)
        dates = f"happened {event}" + (f", recorded {written}" if written and written != event else "")
        context = f" (context: {fact['context']})" if fact.get("context") else ""
        lines.append(f"{index}. [{dates}] {fact.get('text', '')}{context}")
    return "\n".join(lines)


def _delta_messages(plan: Plan, doc: Document, facts: list[dict[str, Any]]) -> list[dict[str, Any]]:
    outline = json.dumps(doc.outline(), ensure_ascii=False, indent=1)
    previous = _window_facts(_normalise_based_on((plan.model.reflect_response or {}).get("based_on")))
    as_of = ""
    if previous:
        # Facts can arrive out of date order (a backfill): say how recent the document already
        # is, so an older fact is not taken for news about the same thing (#4427).
        as_of = (f"The document already reflects facts up to {_fact_time(previous[-1])[0]}; a new "
                 "fact that happened before that is history, not the current state.\n\n")
    return [
        {"role": "system", "content": DELTA_SYSTEM},
        {"role": "user", "content": (
            f"Topic: {plan.model.source_query.strip()}\n\n"
            f"Current document (sections and blocks with their ids):\n{outline}\n\n"
            f"{as_of}New facts, oldest first:\n{_facts_text(facts)}"
        )},
    ]


def _ids_hint(doc: Document) -> str:
    lines = []
    for section in doc.sections:
        label = section.heading or "(text before the first heading)"
        blocks = ", ".join(repr(b.id) for b in section.blocks) or "none"
        lines.append(f"- section {section.id!r} {label}: blocks {blocks}")
    return "\n".join(lines)


def _retry_message(*, doc: Document, result: DeltaResult | None, error: str | None) -> str:
    if result is not None:
        reasons = "\n".join(f"- operation {d['index']}: {d['reason']}" for d in result.skipped)
        wrong = ", ".join(repr(i) for i in result.wrong_ids) or "none"
        head = (f"None of your operations could be applied:\n{reasons}\n\n"
                f"Ids you used that do not exist where you used them: {wrong}.")
    else:
        head = f"Your answer could not be read as {{\"operations\": [...]}}: {error}"
    return (f"{head}\n\nThe document has exactly these sections and blocks:\n{_ids_hint(doc)}\n\n"
            "Answer again with operations against these ids only.")


def _ops_call(plan: Plan, messages: list[dict[str, Any]], clock: RefreshClock,
              scope: str) -> list[Any]:
    """One ops call; ``LLMOutputError`` when the answer cannot be read, other LLM errors and
    the wall timeout as they come."""
    clock.check()
    answer = get_llm().structured(
        messages, schema=ANSWER_SCHEMA, name="delta_operations", strict=False,
        deadline=Deadline(max(clock.remaining(), 0.001)), purpose="mental_model_delta",
    )
    clock.add_usage(answer.usage)
    clock.llm_calls.append({"scope": scope, "duration_ms": int(answer.duration_ms or 0)})
    operations = answer.data.get("operations") if isinstance(answer.data, dict) else None
    if not isinstance(operations, list):
        raise LLMOutputError("the answer has no 'operations' list")
    return operations


def _record(clock: RefreshClock, result: DeltaResult, attempt: int) -> None:
    ops = clock.delta_operations or {"applied": [], "skipped": []}
    ops["applied"] += [{**entry, "attempt": attempt} for entry in result.applied]
    ops["skipped"] += [{**entry, "attempt": attempt} for entry in result.skipped]
    clock.delta_operations = ops


def _delta_fail(message: str, reason: str) -> RefreshFailed:
    return _fail(f"{message}; the document, its structure and the window were left as they are",
                 outcome=RefreshOutcome.REFRESH_FAILED_DELTA_NOT_APPLIED, reason=reason)


def _delta(plan: Plan, decided: Outcome, clock: RefreshClock) -> Outcome:
    """DL-2..DL-6: turn the window's cited facts into operations on the current document."""
    model = plan.model
    doc = document_for(model.content or "", model.document)
    facts = _window_facts(decided.based_on)
    messages = _delta_messages(plan, doc, facts)
    clock.delta_operations = {"applied": [], "skipped": []}
    result: DeltaResult | None = None
    for attempt in (1, 2):
        error = None
        try:
            operations = _ops_call(plan, messages, clock, scope=f"delta_{attempt}")
        except LLMOutputError as exc:
            error = str(exc)
            operations = None
        except LLMTimeout as exc:
            raise _fail(f"refresh exceeded HINDSIGHT_API_REFLECT_WALL_TIMEOUT ({clock.limit:g} s) "
                        f"waiting for the delta operations: {exc}",
                        outcome=RefreshOutcome.REFRESH_FAILED_ERROR,
                        reason=RefreshFailureReason.UNEXPECTED_ERROR, timed_out=True) from exc
        except LLMError as exc:
            raise _delta_fail(f"the delta operations call failed: {type(exc).__name__}: {exc}",
                              RefreshFailureReason.DELTA_OPS_FAILED) from exc
        except TimeoutError as exc:
            raise _fail(str(exc), outcome=RefreshOutcome.REFRESH_FAILED_ERROR,
                        reason=RefreshFailureReason.UNEXPECTED_ERROR, timed_out=True) from exc
        if operations is not None:
            result = apply_operations(doc, operations)
            _record(clock, result, attempt)
            if not result.all_dropped:
                break
        if attempt == 2:
            if operations is None:
                raise _delta_fail(f"the delta operations answer could not be read on the retry: {error}",
                                  RefreshFailureReason.STRUCTURED_DOC_UNREADABLE)
            assert result is not None
            raise _delta_fail(
                f"every delta operation was dropped, twice (last: "
                f"{'; '.join(d['reason'] for d in result.skipped[:5])})",
                RefreshFailureReason.DELTA_OPS_ALL_SKIPPED)
        # Ask once more (DL-4), showing the answer, what was wrong with it and the real ids.
        if operations is None:
            answer_text, retry = "(unreadable)", _retry_message(doc=doc, result=None, error=error)
        else:
            answer_text = json.dumps({"operations": operations}, ensure_ascii=False)
            retry = _retry_message(doc=doc, result=result, error=None)
        messages = [*messages, {"role": "assistant", "content": answer_text},
                    {"role": "user", "content": retry}]
    assert result is not None
    if result.skipped:
        clock.warnings.append(
            f"{len(clock.delta_operations['skipped'])} delta operation(s) were dropped; see "
            "delta_operations.skipped for what did not make it into the document")
    merged = render(result.document)
    if not merged.strip():
        raise _delta_fail("the delta operations would leave the document empty",
                          RefreshFailureReason.DELTA_NOT_APPLIED)
    current = model.content or ""
    previous = (model.reflect_response or {}).get("based_on")
    return replace(
        decided,
        outcome=RefreshOutcome.CONTENT_UNCHANGED if merged == current
        else RefreshOutcome.CONTENT_WRITTEN,
        content=merged,
        document=result.document.as_json(),
        based_on=_accumulate(previous, decided.based_on),
        mental_models=_dedupe([*((model.reflect_response or {}).get("mental_models") or []),
                               *decided.mental_models]),
        delta_operations=clock.delta_operations,
    )


def _dedupe(entries: list[Any]) -> list[Any]:
    seen: set[str] = set()
    out = []
    for entry in entries:
        key = str(entry.get("id")) if isinstance(entry, dict) else repr(entry)
        if key not in seen:
            seen.add(key)
            out.append(entry)
    return out


def _accumulate(previous: Any, new: dict[str, list[dict[str, Any]]]) -> dict[str, list[dict[str, Any]]]:
    """RF-8: this refresh's citations merged into everything the document already rested on,
    deduplicated by id (the newer entry of an id wins: an updated observation's text)."""
    old = _normalise_based_on(previous if isinstance(previous, dict) else None)
    merged = {}
    for key in BASED_ON_KEYS:
        fresh = {str(e.get("id")): e for e in new.get(key) or [] if isinstance(e, dict)}
        kept = [e for e in old[key] if isinstance(e, dict) and str(e.get("id")) not in fresh]
        merged[key] = _dedupe([*kept, *fresh.values()])
    return merged


def _delta_metadata(ops: dict[str, list[dict[str, Any]]] | None) -> dict[str, Any]:
    return {
        "delta_ops_applied": len(ops["applied"]) if ops else 0,
        "delta_ops_skipped": len(ops["skipped"]) if ops else 0,
        "delta_operations": bounded_ops(ops),
    }


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
        answer = get_llm(bank_id=plan.model.bank_id).structured(
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
        raise _fail(failure, outcome=RefreshOutcome.REFRESH_FAILED_STRUCTURED_OUTPUT,
                    reason=RefreshFailureReason.STRUCTURED_OUTPUT_FAILED)
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
    details = {"operation_type": MentalModelOperationType.REFRESH, "outcome": decided.outcome,
               "failure_reason": None}
    metadata = {
        "name": plan.model.name,
        "mental_model_id": plan.model.mental_model_id,
        "outcome": decided.outcome,
        "failure_reason": None,
        "content_len": len(decided.content),
        "based_on_counts": _based_on_counts(decided.based_on),
        **_delta_metadata(decided.delta_operations),
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
                  "reflect_response", "updated_at", *FAILURE_FIELDS]
        model.last_refreshed_at = ClockTimestamp()
        model.last_refresh_failed_at = None
        failure_record_clear(model)
        if decided.outcome in (RefreshOutcome.CONTENT_WRITTEN,
                               RefreshOutcome.CONTENT_UNCHANGED) or not (
            model.content or ""
        ).strip():
            # The query this document now answers (DL-5 compares against it). A refresh that
            # kept the old document did not apply a changed query: the next one must still
            # fall back to full for it.
            model.last_refresh_source_query = plan.model.source_query
        model.updated_at = ClockTimestamp()
        if plan.effective_mode == RefreshMode.FULL:
            model.last_full_refreshed_at = ClockTimestamp()
            fields.append("last_full_refreshed_at")
        if decided.watermark is not None:
            model.last_memory_seen_at = decided.watermark
            fields.append("last_memory_seen_at")
        if decided.reflected and decided.outcome in (RefreshOutcome.CONTENT_WRITTEN,
                                                     RefreshOutcome.CONTENT_UNCHANGED):
            response: dict[str, Any] = {
                "text": decided.content,
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
            fields.append("content")
            for key, value in embedding.items():
                setattr(model, key, value)
            fields += list(embedding)
        if content_changes or (decided.document is not None and decided.document != model.document):
            # DL-1: what is stored renders to what is read, on every write.
            document = decided.document if decided.document is not None else (
                split(model.content).as_json() if model.content else None)
            if render_json(document) != model.content:
                raise RuntimeError("refusing to store a document that does not render the content")
            model.document = document
            fields.append("document")
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
        raise _fail(f"retrieval failed ({step}): {exc}", outcome=RefreshOutcome.REFRESH_FAILED_ERROR,
                    reason=RefreshFailureReason.RETRIEVAL_FAILED) from exc


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
        outcome=RefreshOutcome.CONTENT_PRESERVED_NO_NEW_FACTS, content=model.content or "",
        candidate="", watermark=watermark, based_on={}, mental_models=[],
    )
    # An automatic run that asks for mode full is a due full_refresh_cron: a periodic rebuild
    # runs regardless of staleness (OP-5); every other automatic run re-checks it (OP-1).
    if automatic and mode != RefreshMode.FULL:
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
    result = _gather(plan, clock)
    decided = _decide(plan, result, watermark)
    if decided.outcome == RefreshOutcome.CONTENT_PRESERVED_NO_NEW_FACTS:
        clock.warnings.append(NOTHING_CITED)
    elif plan.effective_mode == RefreshMode.DELTA:
        decided = _delta(plan, decided, clock)
    else:
        # A full refresh stores its answer split, so the next delta refresh can edit it.
        decided.document = split(decided.content).as_json()
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
            "effective_mode": clock.plan.effective_mode if clock.plan else None,
            **_delta_metadata(clock.delta_operations),
        }
        raise
    except FenceLost:
        raise  # superseded: not a failed attempt, nothing to record
    except Exception as exc:
        # Cut short from outside (the engine's wall-timeout backstop, the task's soft limit) or
        # a bug: no finer reason than unexpected_error, but what the attempt did so far is still
        # its record (RF-11), carried to the handler on a RefreshInterrupted.
        error = f"{type(exc).__name__}: {exc}"
        clock.warnings.append(error)
        try:
            so_far: dict[str, Any] | None = build_trace(
                clock.plan, clock, outcome=RefreshOutcome.REFRESH_FAILED_ERROR,
                failure_reason=RefreshFailureReason.UNEXPECTED_ERROR, error=error,
            )
        except Exception:  # no trace: the failure stands
            so_far = None
        raise RefreshInterrupted(exc, trace=so_far) from exc
    return Report(plan=plan, outcome=decided, trace=trace, usage=dict(clock.usage),
                  duration_ms=clock.elapsed_ms(), warnings=list(clock.warnings),
                  tool_outputs=clock.tool_outputs)


# Refusals of an answer the LLM gave (a delta that cannot be applied, an empty answer): each has
# an outcome value of its own, so the dry run previews them (200) instead of failing.
_ANSWERED_REFUSALS = (RefreshFailureReason.DELTA_OPS_ALL_SKIPPED,
                      RefreshFailureReason.STRUCTURED_DOC_UNREADABLE,
                      RefreshFailureReason.DELTA_NOT_APPLIED,
                      RefreshFailureReason.EMPTY_CANDIDATE)


def refresh_dry_run(*, bank_id: str, mental_model_id: str) -> Preview:
    """SPEC section 5: the same pipeline, with ``persist`` replaced by the preview."""
    model = _load(bank_id=bank_id, mental_model_id=mental_model_id)
    if model is None:
        raise NotFound(f"Mental model {mental_model_id} not found")
    bank_budget_require(bank_id=bank_id)  # a dry run spends as a refresh does
    clock = RefreshClock()
    try:
        with llm_context(bank_id=bank_id, operation="refresh_dry_run"):  # the request log
            plan, decided = _run(model, mode=None, automatic=False, clock=clock)
    except RefreshFailed as exc:
        if isinstance(exc.__cause__, LLMNotConfigured):
            # No refresh can run on this server at all: the same 400 as reflect, not a 502
            # (no LLM was asked, so nothing upstream failed).
            raise exc.__cause__ from None
        if exc.failure_reason not in _ANSWERED_REFUSALS or clock.plan is None:
            raise DryRunFailed.for_refusal(exc) from exc
        # An answer the refresh would refuse (a delta that cannot be applied, an empty answer)
        # is an outcome the preview has a value for: what it was given and why it was refused
        # are what the caller needs to see. (A provider that failed is an error, as for any
        # refresh.)
        clock.warnings.append(str(exc))
        plan = clock.plan
        decided = Outcome(
            outcome=exc.outcome, content=model.content or "", candidate="",
            watermark=model.last_memory_seen_at, based_on={}, mental_models=[], reflected=True,
            delta_operations=clock.delta_operations,
        )
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
