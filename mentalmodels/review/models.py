"""A proposal: the change a refresh of a model under review would have applied, waiting for a
person (docs/behaviour.md#review-before-apply).

It keeps what approving applies (the content, its structured document, the reflect response, the
watermark and source query the refresh read), what it is judged by (its change against the
version it was made from, in the one change shape; the memories it rests on, inside the reflect
response; the operation that made it), and how it ended. At most one proposal of a model is
pending: a partial unique index says so, whatever the timing.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from typing import Any

from django.db import models
from django.db.models import Q

from hindsight.infra.db import ClockTimestamp


class ProposalStatus(models.TextChoices):
    PENDING = "pending", "pending"
    APPROVED = "approved", "approved"
    REJECTED = "rejected", "rejected"
    SUPERSEDED = "superseded", "superseded"
    EXPIRED = "expired", "expired"


PROPOSAL_STATUSES: tuple[str, ...] = tuple(ProposalStatus.values)


def page_digest(content: str | None, document: Any) -> str:
    """What a version of a page is, for "is this still the page the proposal was made from?"."""
    text = json.dumps([content or "", document], sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


class MentalModelProposal(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    model = models.ForeignKey("mentalmodels.MentalModel", on_delete=models.CASCADE,
                              related_name="proposals")
    status = models.CharField(max_length=16, choices=ProposalStatus.choices,
                              default=ProposalStatus.PENDING)
    # What approving stores on the model.
    content = models.TextField(blank=True)
    document = models.JSONField(null=True, blank=True)
    reflect_response = models.JSONField(null=True, blank=True)
    watermark = models.DateTimeField(null=True, blank=True)
    source_query = models.TextField(null=True, blank=True)
    full_refresh = models.BooleanField(default=False)
    # The version it was made from (a digest of its content and document: approving a proposal
    # whose base is no longer the model's current version is refused) and the change against it.
    base_digest = models.CharField(max_length=64)
    changes = models.JSONField(default=dict)
    operation_id = models.UUIDField(null=True, blank=True)
    created_at = models.DateTimeField(db_default=ClockTimestamp())
    expires_at = models.DateTimeField()
    decided_at = models.DateTimeField(null=True, blank=True)
    # Why it ended: the reviewer's reason for a rejection, or what superseded or expired it.
    reason = models.TextField(null=True, blank=True)
    superseded_by = models.ForeignKey("self", null=True, blank=True, on_delete=models.SET_NULL,
                                      related_name="+")
    # The version entry approving it recorded (the content it replaced).
    version = models.ForeignKey("mentalmodels.MentalModelHistory", null=True, blank=True,
                                on_delete=models.SET_NULL, related_name="+")

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["model"], condition=Q(status="pending"),
                                    name="mm_proposal_one_pending"),
        ]
        indexes = [
            models.Index("model", models.F("created_at").desc(), name="mm_proposal_model_idx"),
            # The expiry sweep reads the pending ones only.
            models.Index(fields=["expires_at"], condition=Q(status="pending"),
                         name="mm_proposal_pending_expiry_idx"),
        ]

    def __str__(self) -> str:
        return f"proposal {self.id} ({self.status}) of {self.model_id}"
