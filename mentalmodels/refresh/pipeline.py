"""The steps of one refresh, in order, and their two callers.

``plan`` (mode, scope, snapshot cutoff, exclusions) → a delta refresh's retracted facts
(``retraction_find``) → precheck (anything in reach? if not, complete without an LLM request) →
``gather`` (the reflect agent loop under the wall timeout) → ``decide`` (outcome and guards: never
lose a document) → a delta refresh's edits (``delta_refresh``; a full refresh stores the answer
split into sections; a retraction the edits ignore rewrites the page in full) → ``extract``
(structured output) → ``persist`` (one fenced transaction) — or, for the dry run, the preview
instead of ``persist``. Each step's rule is in docs/behaviour.md#a-refresh.

``refresh_run`` is one attempt of a refresh operation. However it ends, the attempt's record
is written on its job once (``RefreshAttempt.record_on``); a refusal raises ``RefreshFailed``
(nothing of the model written), a refresh cut short from outside or by a bug
``RefreshInterrupted`` (with the trace so far), a model deleted or edited meanwhile
``FenceLost`` (superseded, not an attempt). The handler's hook records the failure entry and,
after the last retry, the pause (``mentalmodels.refresh.handler``).
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

from hindsight.banks.budget import bank_budget_require
from hindsight.infra.errors import LLMNotConfigured, NotFound
from hindsight.infra.llm.context import llm_context
from hindsight.infra.vocabulary import RefreshFailureReason, RefreshMode, RefreshOutcome
from mentalmodels.document.structure import split
from mentalmodels.models import MentalModel
from mentalmodels.refresh.answer import NOTHING_CITED, decide, gather
from mentalmodels.refresh.attempt import RefreshAttempt
from mentalmodels.refresh.delta import RetractionIgnored, delta_refresh
from mentalmodels.refresh.errors import DryRunFailed, RefreshFailed, RefreshInterrupted
from mentalmodels.refresh.extraction import extract_structured_output
from mentalmodels.refresh.failures import retrieval_guarded
from mentalmodels.refresh.persistence import refresh_persist
from mentalmodels.refresh.plan import newest_in_scope, refresh_plan, sibling_in_reach
from mentalmodels.refresh.records import Outcome, Plan, Preview, Report
from mentalmodels.refresh.retraction import Retraction, retraction_find
from mentalmodels.refresh.trace import build_trace
from mentalmodels.staleness import stale_flags
from operations.errors import FenceLost, OperationFailure

if TYPE_CHECKING:
    from operations.jobs import Job

NOTHING_READABLE = (
    "Nothing in this document's scope was readable, so the reflect loop was skipped and the "
    "document left as it is. Check the resolved scope — tags, tag_groups and fact_types all "
    "narrow it — and whether the bank holds memories that match it."
)


DIRECTIVES_CHANGED = (
    "A directive that applies to this document changed since its last refresh, so this delta "
    "refresh ran in full mode: the whole document is rewritten under the directives as they are "
    "now."
)


# docs/behaviour.md#retracted-facts
RETRACTED_EVERYTHING = (
    "Every memory this document cites was removed or edited since its last refresh, so nothing "
    "was left to edit it against: this delta refresh ran in full mode, from the memories as they "
    "are now."
)
RETRACTION_IGNORED = (
    "Memories this document cites were removed or edited since its last refresh and the edit "
    "answer removed or rewrote nothing (or would have left the document empty), so this delta "
    "refresh ran in full mode: the whole document is rewritten from the memories as they are now."
)
RETRACTION_STANDS = (
    "The full rewrite for the retracted memories cited nothing, so the document was kept as it "
    "is and may still say what they said; it no longer cites them."
)


def _in_full(plan: Plan, attempt: RefreshAttempt, why: str) -> Plan:
    """The plan of a delta refresh that runs in full mode instead (``why`` goes in the trace)."""
    attempt.warnings.append(why)
    plan = replace(plan, effective_mode=RefreshMode.FULL, window_after=None)
    attempt.plan = plan
    return plan


def _full_answer(plan: Plan, decided: Outcome) -> Outcome:
    if decided.outcome != RefreshOutcome.CONTENT_PRESERVED_NO_NEW_FACTS:
        # A full refresh stores its answer split, so the next delta refresh can edit it.
        decided.document = split(decided.content).as_json()
    return decided


def _load(*, bank_id: str, mental_model_id: str) -> MentalModel | None:
    return MentalModel.objects.filter(bank_id=bank_id, mental_model_id=mental_model_id).first()


def _steps(
    model: MentalModel, *, mode: str | None, automatic: bool, attempt: RefreshAttempt
) -> tuple[Plan, Outcome]:
    """plan → retracted facts → precheck → gather → decide → delta → extract: everything but
    the write."""
    # The snapshot cutoff is the first read of the refresh (it bounds every later one): a
    # database that fails it fails retrieval, not the refresh in some unexplained way.
    with retrieval_guarded("taking the snapshot cutoff"):
        plan = refresh_plan(model, mode=mode)
    attempt.plan = plan
    if plan.directives_changed:
        attempt.warnings.append(DIRECTIVES_CHANGED)
    retraction: Retraction | None = None
    if plan.effective_mode == RefreshMode.DELTA:
        with retrieval_guarded("reading the memories the document cites"):
            retraction = retraction_find(plan)
        attempt.retraction = retraction
        if retraction is not None and retraction.everything:
            retraction.rewritten = True
            plan = _in_full(plan, attempt, RETRACTED_EVERYTHING)
    with retrieval_guarded("reading the newest memory in scope"):
        newest = newest_in_scope(plan, after=None)
        in_window = (
            newest if plan.window_after is None
            else newest_in_scope(plan, after=plan.window_after)
        )
    watermark = newest if newest is not None else model.last_memory_seen_at
    preserved = Outcome(
        outcome=RefreshOutcome.CONTENT_PRESERVED_NO_NEW_FACTS, content=model.content or "",
        candidate="", watermark=watermark, based_on={}, mental_models=[],
        uncited_ids=retraction.ids if retraction else frozenset(),
    )
    # An automatic run that asks for mode full is a due full_refresh_cron: a periodic rebuild
    # runs regardless of staleness (docs/behaviour.md#the-cron-tick); every other automatic run
    # re-checks it (docs/behaviour.md#coalescing) — unless the page cites retracted memories
    # (docs/behaviour.md#retracted-facts).
    if automatic and mode != RefreshMode.FULL and retraction is None:
        with retrieval_guarded("re-checking staleness"):
            stale = stale_flags([model])[model.uid]
        if not stale:
            # docs/behaviour.md#coalescing: the previous refresh already read everything this
            # trigger was about.
            attempt.warnings.append("The model was not stale when the automatic refresh started.")
            # Nothing was read, so the watermark stays where the last read left it: under
            # any/all the scope can hold untagged memories staleness ignores, and moving past
            # them would drop them from a later delta window (docs/behaviour.md#the-snapshot-cutoff).
            return plan, replace(preserved, watermark=model.last_memory_seen_at)
    edits = plan.effective_mode == RefreshMode.DELTA
    # No memory new (the window may hold curation changes alone: an invalidation, a deletion),
    # but retracted facts to take out: the edit call alone, no reflect loop
    # (docs/behaviour.md#retracted-facts).
    retraction_only = edits and retraction is not None and in_window is None
    if edits and retraction is not None and in_window is not None:
        with retrieval_guarded("reading the newest memory in the window"):
            retraction_only = newest_in_scope(plan, after=plan.window_after, changes=False) is None
    if in_window is None and not retraction_only:
        with retrieval_guarded("looking for sibling mental models in reach"):
            sibling = sibling_in_reach(plan)
        if not sibling:
            attempt.warnings.append(NOTHING_READABLE)
            if retraction is not None:
                attempt.warnings.append(RETRACTION_STANDS)
            return plan, preserved
    if retraction_only:
        decided = replace(preserved, reflected=True)
    else:
        decided = decide(plan, gather(plan, attempt), watermark)
    if edits and (retraction or decided.outcome != RefreshOutcome.CONTENT_PRESERVED_NO_NEW_FACTS):
        try:
            decided = delta_refresh(plan, decided, attempt, retraction)
        except RetractionIgnored:
            assert retraction is not None
            retraction.rewritten = True
            plan = _in_full(plan, attempt, RETRACTION_IGNORED)
            decided = _full_answer(plan, decide(plan, gather(plan, attempt), watermark))
    elif not edits:
        decided = _full_answer(plan, decided)
    if decided.outcome == RefreshOutcome.CONTENT_PRESERVED_NO_NEW_FACTS:
        attempt.warnings.append(RETRACTION_STANDS if retraction else NOTHING_CITED)
    if retraction is not None:
        retraction.applied = retraction.applied or (
            retraction.rewritten and decided.outcome != RefreshOutcome.CONTENT_PRESERVED_NO_NEW_FACTS)
        decided.uncited_ids = retraction.ids
    extract_structured_output(plan, decided, attempt)
    return plan, decided


def _model_of(job: Job) -> MentalModel:
    mental_model_id = job.operation.mental_model_id
    if mental_model_id is None:  # not one of ours: no retry will give it a model
        raise OperationFailure("refresh operation without a mental_model_id", retryable=False)
    model = _load(bank_id=job.bank_id, mental_model_id=mental_model_id)
    if model is None:
        # Deleted before this run started: superseded, nothing to write.
        raise FenceLost(f"mental model {mental_model_id} no longer exists in bank {job.bank_id}")
    return model


def refresh_run(*, job: Job) -> Report:
    """One attempt of the refresh operation ``job``: the steps, then the fenced write; the
    attempt's record written on ``job`` however it ends (module docstring)."""
    attempt = RefreshAttempt()
    try:
        attempt.model = _model_of(job)
        plan, decided = _steps(attempt.model, mode=job.payload.get("mode"),
                               automatic=job.automatic, attempt=attempt)
        trace = build_trace(plan, attempt, outcome=decided.outcome)
        attempt.record_on(job, outcome=decided.outcome, decided=decided)
        refresh_persist(plan, decided, trace, job)
    except RefreshFailed as exc:
        attempt.warnings.append(str(exc))
        exc.trace = build_trace(attempt.plan, attempt, outcome=exc.outcome,
                                failure_reason=exc.failure_reason, error=str(exc))
        attempt.record_on(job, outcome=exc.outcome, failure_reason=exc.failure_reason)
        raise
    except FenceLost:
        raise  # superseded: not a failed attempt, nothing to record
    except Exception as exc:
        # Cut short from outside (the engine's wall-timeout backstop, the task's soft limit) or
        # a bug: no finer reason than unexpected_error, but what the attempt did so far is still
        # its record (docs/behaviour.md#the-trace), carried to the handler on a RefreshInterrupted.
        error = f"{type(exc).__name__}: {exc}"
        attempt.warnings.append(error)
        outcome, reason = RefreshOutcome.REFRESH_FAILED_ERROR, RefreshFailureReason.UNEXPECTED_ERROR
        try:
            so_far: dict[str, Any] | None = build_trace(
                attempt.plan, attempt, outcome=outcome, failure_reason=reason, error=error)
        except Exception:  # no trace: the failure stands
            so_far = None
        attempt.record_on(job, outcome=outcome, failure_reason=reason)
        raise RefreshInterrupted(exc, trace=so_far) from exc
    return Report(plan=plan, outcome=decided, trace=trace, usage=dict(attempt.usage),
                  duration_ms=attempt.elapsed_ms(), warnings=list(attempt.warnings),
                  tool_outputs=attempt.tool_outputs)


# Refusals of an answer the LLM gave (a delta that cannot be applied, an empty answer): each has
# an outcome value of its own, so the dry run previews them (200) instead of failing.
_ANSWERED_REFUSALS = (RefreshFailureReason.DELTA_OPS_ALL_SKIPPED,
                      RefreshFailureReason.STRUCTURED_DOC_UNREADABLE,
                      RefreshFailureReason.DELTA_NOT_APPLIED,
                      RefreshFailureReason.EMPTY_CANDIDATE)


def refresh_dry_run(*, bank_id: str, mental_model_id: str) -> Preview:
    """The dry run (docs/behaviour.md#the-dry-run): the same steps, with ``persist`` replaced by the
    preview."""
    model = _load(bank_id=bank_id, mental_model_id=mental_model_id)
    if model is None:
        raise NotFound(f"Mental model {mental_model_id} not found")
    bank_budget_require(bank_id=bank_id)  # a dry run spends as a refresh does
    attempt = RefreshAttempt(model)
    try:
        with llm_context(bank_id=bank_id, operation="refresh_dry_run"):  # the request log
            plan, decided = _steps(model, mode=None, automatic=False, attempt=attempt)
    except RefreshFailed as exc:
        if isinstance(exc.__cause__, LLMNotConfigured):
            # No refresh can run on this server at all: the same 400 as reflect, not a 502
            # (no LLM was asked, so nothing upstream failed).
            raise exc.__cause__ from None
        if exc.failure_reason not in _ANSWERED_REFUSALS or attempt.plan is None:
            raise DryRunFailed.for_refusal(exc) from exc
        # An answer the refresh would refuse (a delta that cannot be applied, an empty answer)
        # is an outcome the preview has a value for: what it was given and why it was refused
        # are what the caller needs to see. (A provider that failed is an error, as for any
        # refresh.)
        attempt.warnings.append(str(exc))
        plan = attempt.plan
        decided = Outcome(
            outcome=exc.outcome, content=model.content or "", candidate="",
            watermark=model.last_memory_seen_at, based_on={}, mental_models=[], reflected=True,
            delta_operations=attempt.delta_operations,
        )
    return Preview(
        model=model,
        plan=plan,
        outcome=decided,
        current_content=model.content or "",
        trace=build_trace(plan, attempt, outcome=decided.outcome, with_outputs=True),
        usage=dict(attempt.usage),
        duration_ms=attempt.elapsed_ms(),
        warnings=list(attempt.warnings),
    )
