"""Writes of the review step (docs/behaviour.md#review-before-apply): a refresh's proposal (from
inside its fenced write), approve, reject, and the expiry sweep.

Lock order, as every writer of a model: the key's lease, the model row, then the proposal and
the operations. Approving bumps the refresh's fence first, so a refresh running meanwhile cannot
write after it (one of the two wins, nothing is torn); a refresh that finished first has
superseded the proposal, and approving it is refused.
"""

from __future__ import annotations

import copy
import uuid
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from hindsight.banks.models import Bank
from hindsight.infra.db import ClockTimestamp
from hindsight.infra.errors import Conflict, FieldError, NotFound
from hindsight.infra.vocabulary import RefreshMode
from mentalmodels.document.diff import PageVersion, page_diff
from mentalmodels.events import mental_model_refreshed
from mentalmodels.models import MentalModel, VersionCause
from mentalmodels.review.models import MentalModelProposal, ProposalStatus, page_digest
from mentalmodels.services import (
    history_record_version,
    mental_model_refresh_submit,
    refresh_dedupe_key,
)
from operations.leases import lease_bump
from operations.models import PROCESSING, Operation
from operations.queue import operations_cancel_parked

REVIEW_KEY = "review"
BANK_REVIEW_KEY = "mental_model_review"
CANCELLED_FOR_REVIEW = "cancelled: a proposal of this model waits for review"
SUPERSEDED_BY_NEWER = "superseded by a newer proposal"
SUPERSEDED_BY_CHANGE = "the page changed since this proposal was made"
REASON_MAX_CHARS = 2000


def review_required(*, model: MentalModel) -> bool:
    """The model's ``trigger.review``, or (null) its bank's ``mental_model_review``."""
    own = (model.trigger or {}).get(REVIEW_KEY)
    if own is not None:
        return bool(own)
    config = Bank.objects.filter(id=model.bank_id).values_list("config", flat=True).first()
    return bool((config or {}).get(BANK_REVIEW_KEY) or False)


def proposal_record(
    *,
    model: MentalModel,
    content: str,
    document: Any,
    reflect_response: dict[str, Any] | None,
    watermark: datetime | None,
    source_query: str,
    full_refresh: bool,
    operation_id: uuid.UUID | None,
) -> MentalModelProposal:
    """A refresh's change as a proposal, inside the refresh's fenced write with ``model`` (its
    row) locked: the pending one it supersedes ends ``superseded``, and the automatic refreshes
    queued for the model are cancelled (none runs while the proposal waits)."""
    previous = list(MentalModelProposal.objects.select_for_update()
                    .filter(model=model, status=ProposalStatus.PENDING))
    MentalModelProposal.objects.filter(id__in=[p.id for p in previous]).update(
        status=ProposalStatus.SUPERSEDED, decided_at=ClockTimestamp(), reason=SUPERSEDED_BY_NEWER)
    proposal = MentalModelProposal.objects.create(
        model=model,
        content=content,
        document=document,
        reflect_response=reflect_response,
        watermark=watermark,
        source_query=source_query,
        full_refresh=full_refresh,
        base_digest=page_digest(model.content, model.document),
        changes=page_diff(PageVersion(model.content or "", model.document),
                          PageVersion(content, document)),
        operation_id=operation_id,
        expires_at=timezone.now() + timedelta(
            seconds=settings.HINDSIGHT.mental_model_proposal_ttl_seconds),
    )
    MentalModelProposal.objects.filter(id__in=[p.id for p in previous]).update(
        superseded_by=proposal)
    key = refresh_dedupe_key(bank_id=model.bank_id, mental_model_id=model.mental_model_id)
    cancelled = operations_cancel_parked(dedupe_key=key, parked_only=False)
    if cancelled:
        Operation.objects.filter(id__in=cancelled).update(error_message=CANCELLED_FOR_REVIEW)
    return proposal


def _proposal_for_update(*, model: MentalModel, proposal_id: uuid.UUID) -> MentalModelProposal:
    proposal = (MentalModelProposal.objects.select_for_update()
                .filter(id=proposal_id, model=model).first())
    if proposal is None:
        raise NotFound(f"Proposal {proposal_id} not found for mental model "
                       f"'{model.mental_model_id}'")
    return proposal


def _model_for_update(*, bank_id: str, mental_model_id: str) -> MentalModel:
    model = (MentalModel.objects.select_for_update()
             .filter(bank_id=bank_id, mental_model_id=mental_model_id).first())
    if model is None:
        raise NotFound(f"Mental model '{mental_model_id}' not found")
    return model


def _refuse_unless_pending(proposal: MentalModelProposal, *, action: str) -> None:
    if proposal.status != ProposalStatus.PENDING:
        raise Conflict(f"Proposal {proposal.id} is {proposal.status}: only a pending proposal "
                       f"can be {action}")


def _ended(proposal: MentalModelProposal, *, status: str, reason: str) -> None:
    proposal.status = status
    proposal.reason = reason
    proposal.decided_at = timezone.now()
    proposal.save(update_fields=["status", "reason", "decided_at"])


def proposal_approve(*, bank_id: str, mental_model_id: str,
                     proposal_id: uuid.UUID) -> MentalModelProposal:
    """Apply a pending proposal as a version of its own (docs/behaviour.md#review-before-apply).

    Refused (409) when it is no longer pending, when it expired (it is marked so), or when the
    model's page is no longer the version it was made from (a restore, a clear or an edit came
    between: it is marked superseded). The refresh's fence is bumped first, so a refresh running
    meanwhile cannot write over it; one is queued behind it then, as after an edit."""
    key = refresh_dedupe_key(bank_id=bank_id, mental_model_id=mental_model_id)
    running_at_arrival = Operation.objects.filter(dedupe_key=key, status=PROCESSING).exists()
    refusal: str | None = None
    with transaction.atomic():
        lease_bump(key=key)
        model = _model_for_update(bank_id=bank_id, mental_model_id=mental_model_id)
        proposal = _proposal_for_update(model=model, proposal_id=proposal_id)
        _refuse_unless_pending(proposal, action="approved")
        if proposal.expires_at <= timezone.now():
            _ended(proposal, status=ProposalStatus.EXPIRED, reason=_expiry_reason())
            refusal = f"Proposal {proposal.id} expired at {proposal.expires_at.isoformat()}"
        elif proposal.base_digest != page_digest(model.content, model.document):
            _ended(proposal, status=ProposalStatus.SUPERSEDED, reason=SUPERSEDED_BY_CHANGE)
            refusal = (f"Proposal {proposal.id} was made from a version that is no longer the "
                       "current one (restored, cleared or changed since): refresh again")
        else:
            _apply(model, proposal)
        if running_at_arrival or Operation.objects.filter(dedupe_key=key,
                                                          status=PROCESSING).exists():
            mental_model_refresh_submit(model=model)  # its fence moved: it cannot write
    if refusal is not None:
        raise Conflict(refusal)
    return proposal


def _apply(model: MentalModel, proposal: MentalModelProposal) -> None:
    before = copy.copy(model)
    entry = history_record_version(
        model=model,
        previous_content=model.content,
        previous_document=model.document,
        previous_reflect_response=model.reflect_response,
        operation_id=proposal.operation_id,
        reason=VersionCause.APPROVED,
    )
    model.content = proposal.content
    model.document = proposal.document
    model.reflect_response = proposal.reflect_response
    model.last_refresh_source_query = proposal.source_query
    fields = ["content", "document", "reflect_response", "last_refresh_source_query",
              "updated_at"]
    if proposal.watermark is not None:
        model.last_memory_seen_at = proposal.watermark
        fields.append("last_memory_seen_at")
    if proposal.full_refresh:
        model.last_full_refreshed_at = proposal.created_at
        fields.append("last_full_refreshed_at")
    model.updated_at = ClockTimestamp()
    model.save(update_fields=fields)
    proposal.status = ProposalStatus.APPROVED
    proposal.decided_at = timezone.now()
    proposal.version = entry
    proposal.save(update_fields=["status", "decided_at", "version"])
    # docs/behaviour.md#page-events: the refresh's change lands now.
    mental_model_refreshed(before=before, after=model, operation_id=proposal.operation_id,
                           outcome=VersionCause.APPROVED,
                           mode=RefreshMode.FULL if proposal.full_refresh else RefreshMode.DELTA)


def reason_problem(reason: Any) -> str | None:
    if not isinstance(reason, str) or not reason.strip():
        return "reason is required: a non-blank string saying why the change is rejected"
    if len(reason) > REASON_MAX_CHARS:
        return f"reason must be at most {REASON_MAX_CHARS} characters"
    return None


def proposal_reject(*, bank_id: str, mental_model_id: str, proposal_id: uuid.UUID,
                    reason: str) -> MentalModelProposal:
    """Discard a pending proposal, keeping the reviewer's reason; the page stays as it is."""
    problem = reason_problem(reason)
    if problem:
        raise FieldError(("body", "reason"), problem)
    with transaction.atomic():
        model = (MentalModel.objects.filter(bank_id=bank_id, mental_model_id=mental_model_id)
                 .first())
        if model is None:
            raise NotFound(f"Mental model '{mental_model_id}' not found")
        proposal = _proposal_for_update(model=model, proposal_id=proposal_id)
        _refuse_unless_pending(proposal, action="rejected")
        _ended(proposal, status=ProposalStatus.REJECTED, reason=reason.strip())
    return proposal


def _expiry_reason() -> str:
    seconds = settings.HINDSIGHT.mental_model_proposal_ttl_seconds
    return f"not reviewed within {seconds:g} s (HINDSIGHT_API_MENTAL_MODEL_PROPOSAL_TTL_SECONDS)"


def proposals_expire(*, now: datetime | None = None) -> int:
    """The beat's sweep: every pending proposal past its ``expires_at`` ends ``expired``."""
    return MentalModelProposal.objects.filter(
        status=ProposalStatus.PENDING, expires_at__lte=now or timezone.now(),
    ).update(status=ProposalStatus.EXPIRED, decided_at=ClockTimestamp(), reason=_expiry_reason())
