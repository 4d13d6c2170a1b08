"""The one write of a refresh's result: a single fenced transaction (``job.finishing()``: the fence
check on the key's lease, the model row, the operation's completion) that stores the document and
its structure (docs/behaviour.md#the-document), the watermark, the timestamps, ``reflect_response``
and the version history. A job whose fence moved on (an edit, a newer claim) writes nothing
(``FenceLost``); a model deleted meanwhile is the same. There is no unfenced path.

A model under review (docs/behaviour.md#review-before-apply) keeps its page: a change becomes a
proposal (``mentalmodels.review.services.proposal_record``), in the same fenced transaction, and
the refresh records only that it completed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from hindsight.infra.db import ClockTimestamp
from hindsight.infra.embeddings import get_embedder
from hindsight.infra.vocabulary import RefreshMode, RefreshOutcome
from mentalmodels.document.structure import render_json, split
from mentalmodels.events import mental_model_refreshed
from mentalmodels.models import MentalModel
from mentalmodels.reflect.mm_search import content_hash, embedding_text
from mentalmodels.refresh.answer import normalise_based_on
from mentalmodels.refresh.failure_class import FAILURE_FIELDS, failure_record_clear
from mentalmodels.refresh.records import Outcome, Plan
from mentalmodels.refresh.retraction import prune_based_on
from mentalmodels.review.services import proposal_record, review_required
from mentalmodels.services import history_record_version
from operations.errors import FenceLost

if TYPE_CHECKING:
    from operations.jobs import Job


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


def refresh_persist(plan: Plan, decided: Outcome, trace: dict[str, Any], job: Job) -> None:
    """Store ``decided`` and complete ``job``, in one fenced transaction."""
    content_changes = decided.content != (plan.model.content or "")
    review = review_required(model=plan.model)
    embedding = _embed(plan.model, decided.content) if content_changes and not review else {}
    with job.finishing():
        model = MentalModel.objects.select_for_update().filter(uid=plan.model.uid).first()
        if model is None:
            raise FenceLost(f"mental model {plan.model.mental_model_id} was deleted")
        previous_response = model.reflect_response
        fields = ["last_refreshed_at", "last_refresh_failed_at", "last_refresh_source_query",
                  "reflect_response", "updated_at", *FAILURE_FIELDS]
        model.last_refreshed_at = ClockTimestamp()
        model.last_refresh_failed_at = None
        failure_record_clear(model)  # no pause, no backoff after transient failures
        if review and _propose(plan, decided, trace, job, model):
            # The page, its watermark and reflect_response stay until the proposal is approved.
            model.updated_at = ClockTimestamp()
            model.save(update_fields=["last_refreshed_at", "last_refresh_failed_at",
                                      "updated_at", *FAILURE_FIELDS])
            # Completed, the page unchanged (its change comes with the approval's event).
            mental_model_refreshed(before=plan.model, after=model, operation_id=job.operation.id,
                                   outcome=decided.outcome, mode=plan.effective_mode)
            return
        if decided.outcome in (RefreshOutcome.CONTENT_WRITTEN,
                               RefreshOutcome.CONTENT_UNCHANGED) or not (
            model.content or ""
        ).strip():
            # The query this document now answers (docs/behaviour.md#when-delta-falls-back-to-full
            # compares against it). A refresh that kept the old document did not apply a changed
            # query: the next one must still fall back to full for it.
            model.last_refresh_source_query = plan.model.source_query
        model.updated_at = ClockTimestamp()
        if plan.effective_mode == RefreshMode.FULL:
            model.last_full_refreshed_at = ClockTimestamp()
            fields.append("last_full_refreshed_at")
        if decided.watermark is not None:
            model.last_memory_seen_at = decided.watermark
            fields.append("last_memory_seen_at")
        model.reflect_response = _reflect_response(plan, decided, trace, previous_response)
        if content_changes:
            history_record_version(
                model=model,
                previous_content=model.content,
                previous_document=model.document,
                previous_reflect_response=previous_response,
                operation_id=job.operation.id,
            )
            model.content = decided.content
            fields.append("content")
            for key, value in embedding.items():
                setattr(model, key, value)
            fields += list(embedding)
        if content_changes or (decided.document is not None and decided.document != model.document):
            model.document = _document_of(decided)
            fields.append("document")
        model.save(update_fields=fields)
        mental_model_refreshed(before=plan.model, after=model, operation_id=job.operation.id,
                               outcome=decided.outcome, mode=plan.effective_mode)


def _document_of(decided: Outcome) -> dict[str, Any] | None:
    """The structured document to store (or propose) with ``decided.content``: the refresh's own,
    else the content split afresh. docs/behaviour.md#the-document: what is stored renders to what
    is read, on every write."""
    document = decided.document if decided.document is not None else (
        split(decided.content).as_json() if decided.content else None)
    if render_json(document) != decided.content:
        raise RuntimeError("refusing to store a document that does not render the content")
    return document


def _propose(plan: Plan, decided: Outcome, trace: dict[str, Any], job: Job,
             model: MentalModel) -> bool:
    """The change as a proposal, if the refresh changes the page's markdown (False: nothing to
    review; a document that only gained ids reads the same and is stored as usual)."""
    if decided.content == (model.content or ""):
        return False
    document = _document_of(decided)
    proposal_record(
        model=model,
        content=decided.content,
        document=document,
        reflect_response=_reflect_response(plan, decided, trace, model.reflect_response),
        watermark=decided.watermark,
        source_query=plan.model.source_query,
        full_refresh=plan.effective_mode == RefreshMode.FULL,
        operation_id=job.operation.id,
    )
    return True


def _reflect_response(
    plan: Plan, decided: Outcome, trace: dict[str, Any], previous: dict[str, Any] | None
) -> dict[str, Any]:
    """What the document rests on: this answer's, or — the document standing — the last one."""
    if decided.reflected and decided.outcome in (RefreshOutcome.CONTENT_WRITTEN,
                                                 RefreshOutcome.CONTENT_UNCHANGED):
        response: dict[str, Any] = {
            "text": decided.content,
            "outcome": decided.outcome,
            "based_on": decided.based_on,
            "mental_models": decided.mental_models,
        }
    else:
        response = dict(previous or {
            "text": "", "based_on": normalise_based_on(None), "mental_models": [],
        })
        response["outcome"] = decided.outcome
        if decided.uncited_ids:  # docs/behaviour.md#retracted-facts
            response["based_on"] = prune_based_on(response.get("based_on"), decided.uncited_ids)
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
    return response
