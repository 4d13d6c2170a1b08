"""Durable jobs: one ``Operation`` row per job and one ``Lease`` row per key (the fence).

PostgreSQL is the truth. Two partial unique indexes make the queue's invariants structural:
at most one *pending* operation per ``dedupe_key`` (coalescing) and at most one *processing*
operation per ``dedupe_key`` (one running job per key even if Redis loses its locks). The lease
row's ``fence`` grows by one on every claim (and on every ``lease_bump``); a job may write only
while the lease still carries the fence it was claimed with.
"""

from __future__ import annotations

import uuid

from django.db import models
from django.db.models import Q
from django.utils import timezone

from hindsight.infra.db import ClockTimestamp
from hindsight.infra.vocabulary import OperationStatus

# Short names for the members, as the engine's code reads them.
PENDING = OperationStatus.PENDING
PROCESSING = OperationStatus.PROCESSING
COMPLETED = OperationStatus.COMPLETED
FAILED = OperationStatus.FAILED
CANCELLED = OperationStatus.CANCELLED
STATUSES: tuple[str, ...] = tuple(status.value for status in OperationStatus)

# ``result_metadata`` key of an operation whose work another operation of its key carries (a
# failed or lost attempt merged into the follower, a retry folded into the pending one). Reads
# report the carrier's status for it (``operations.selectors``).
SUPERSEDED_BY = "superseded_by"


# ``result_metadata`` key of a pending operation a handler's ``hold`` parked (``{"reason",
# "message", …}``: what holds it back). Set by ``operations.queue.operation_park``; the claim
# removes it.
PARKED_BY = "parked_by"


_OWN_KEY_PREFIX = "op:"


def lease_key_for(*, dedupe_key: str | None, operation_id: uuid.UUID | str) -> str:
    """The one rule for an operation's lease key: its dedupe key, else a key of its own."""
    return dedupe_key or f"{_OWN_KEY_PREFIX}{uuid.UUID(str(operation_id))}"


def is_own_key(key: str) -> bool:
    """A key of one operation's own (never shared, never reused once it is done)."""
    return key.startswith(_OWN_KEY_PREFIX)


class Operation(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    bank = models.ForeignKey("banks.Bank", on_delete=models.CASCADE, related_name="operations")
    operation_type = models.CharField(max_length=64)
    # Operations sharing a key coalesce while pending and never run at the same time.
    dedupe_key = models.CharField(max_length=512, null=True, blank=True)
    # Not a foreign key: the operation outlives a deleted model (it ends ``cancelled``).
    mental_model_id = models.CharField(max_length=255, null=True, blank=True)
    status = models.CharField(
        max_length=16, choices=[(s, s) for s in STATUSES], default=OperationStatus.PENDING
    )
    automatic = models.BooleanField(default=False)
    payload = models.JSONField(default=dict, blank=True)
    # Pending with a future value = parked (not sent until due); also the next retry's time.
    next_retry_at = models.DateTimeField(null=True, blank=True)
    retry_count = models.PositiveIntegerField(default=0)
    error_message = models.TextField(null=True, blank=True)
    result_metadata = models.JSONField(default=dict, blank=True)
    details = models.JSONField(null=True, blank=True)
    dispatched_at = models.DateTimeField(null=True, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    # The lease fence this operation was last claimed with (0 = never claimed).
    fence = models.BigIntegerField(default=0)
    created_at = models.DateTimeField(db_default=ClockTimestamp())
    updated_at = models.DateTimeField(db_default=ClockTimestamp())
    completed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["dedupe_key"],
                condition=Q(status=PENDING),
                name="operation_one_pending_per_key",
            ),
            models.UniqueConstraint(
                fields=["dedupe_key"],
                condition=Q(status=PROCESSING),
                name="operation_one_processing_per_key",
            ),
        ]
        indexes = [
            models.Index(fields=["bank", "-created_at"], name="operation_bank_created_idx"),
            models.Index(
                fields=["next_retry_at"],
                condition=Q(status=PENDING),
                name="operation_pending_due_idx",
            ),
            models.Index(
                fields=["heartbeat_at"],
                condition=Q(status=PROCESSING),
                name="operation_processing_hb_idx",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.operation_type} {self.id} ({self.status})"

    @property
    def lease_key(self) -> str:
        """The key its lock and fence live under: the dedupe key, or one of its own."""
        return lease_key_for(dedupe_key=self.dedupe_key, operation_id=self.id)

    @property
    def is_parked(self) -> bool:
        return (
            self.status == PENDING
            and self.next_retry_at is not None
            and self.next_retry_at > timezone.now()
        )


class Lease(models.Model):
    """One row per key: the fence a running job must still hold when it writes."""

    key = models.CharField(primary_key=True, max_length=512)
    fence = models.BigIntegerField(default=0)
    holder = models.CharField(max_length=255, null=True, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"{self.key} @ {self.fence}"
