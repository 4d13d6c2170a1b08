"""Reads of the review step: a model's proposals, one proposal, whether one waits."""

from __future__ import annotations

import uuid

from hindsight.infra.errors import NotFound
from mentalmodels.models import MentalModel
from mentalmodels.review.models import MentalModelProposal, ProposalStatus, page_digest
from mentalmodels.selectors import mental_model_get


def proposals_list(*, bank_id: str, mental_model_id: str,
                   status: str | None = None) -> list[MentalModelProposal]:
    """Newest first; ``status`` narrows it (404 for a model that does not exist)."""
    model = mental_model_get(bank_id=bank_id, mental_model_id=mental_model_id)
    qs = MentalModelProposal.objects.filter(model=model)
    if status is not None:
        qs = qs.filter(status=status)
    return list(qs.select_related("model").order_by("-created_at", "-id"))


def proposal_get(*, bank_id: str, mental_model_id: str,
                 proposal_id: uuid.UUID) -> MentalModelProposal:
    model = mental_model_get(bank_id=bank_id, mental_model_id=mental_model_id)
    proposal = (MentalModelProposal.objects.select_related("model")
                .filter(id=proposal_id, model=model).first())
    if proposal is None:
        raise NotFound(f"Proposal {proposal_id} not found for mental model '{mental_model_id}'")
    return proposal


def proposal_pending(*, model_uid: int) -> bool:
    """Whether an approvable proposal of the model waits: pending, and made from the page the
    model holds now (one a restore or a clear has left behind holds nothing back; approving it
    is refused). One query when none is pending, two otherwise."""
    base = (MentalModelProposal.objects.filter(model_id=model_uid, status=ProposalStatus.PENDING)
            .values_list("base_digest", flat=True).first())
    if base is None:
        return False
    page = MentalModel.objects.filter(uid=model_uid).values_list("content", "document").first()
    return page is not None and base == page_digest(*page)
