"""A bank's webhooks and their deliveries (docs/behaviour.md#webhooks).

``Webhook`` is one subscription: where to (``url``), what (``event_types``), how
(``http_config``: upstream's method, timeout, headers and query parameters), the signing
secret, and whether it is ``enabled`` — turned off by hand, or by the deliveries that ended
``failed`` ``consecutive_failures`` times in a row (``disabled_reason`` says so).

``WebhookDelivery`` is one event for one webhook (``webhook`` null: the global webhook of the
settings): the exact bytes sent on every attempt (``payload``, so the signatures and the
``event_id`` inside are the same on each), where it stands (``status``: the operations' words),
its attempts, the last response and when the next retry is due. The bank is named by string
(this app sits below the banks app).
"""

from __future__ import annotations

import uuid

from django.contrib.postgres.fields import ArrayField
from django.db import models

from hindsight.infra.db import ClockTimestamp
from hindsight.infra.vocabulary import OperationStatus


class Webhook(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    bank = models.ForeignKey("banks.Bank", on_delete=models.CASCADE, related_name="webhooks")
    url = models.TextField()
    secret = models.TextField(null=True, blank=True)
    event_types = ArrayField(models.TextField(), default=list, blank=True)
    enabled = models.BooleanField(default=True)
    http_config = models.JSONField(default=dict, blank=True)
    consecutive_failures = models.IntegerField(default=0)
    disabled_reason = models.TextField(null=True, blank=True)
    created_at = models.DateTimeField(db_default=ClockTimestamp())
    updated_at = models.DateTimeField(db_default=ClockTimestamp())

    class Meta:
        indexes = [models.Index(fields=["bank", "created_at"], name="webhook_bank_created_idx")]

    def __str__(self) -> str:
        return f"{self.url} ({self.bank_id})"


class WebhookDelivery(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    webhook = models.ForeignKey(Webhook, on_delete=models.CASCADE, null=True, blank=True,
                                related_name="deliveries")
    bank = models.ForeignKey("banks.Bank", on_delete=models.CASCADE, related_name="+")
    event_id = models.UUIDField()
    event_type = models.TextField()
    url = models.TextField()
    payload = models.TextField()
    status = models.TextField(default=OperationStatus.PENDING.value)
    attempts = models.IntegerField(default=0)
    next_retry_at = models.DateTimeField(null=True, blank=True)
    # When a message was last published for it (null: none since the last attempt failed).
    dispatched_at = models.DateTimeField(null=True, blank=True)
    # When the running attempt began (status processing).
    claimed_at = models.DateTimeField(null=True, blank=True)
    last_error = models.TextField(null=True, blank=True)
    last_response_status = models.IntegerField(null=True, blank=True)
    last_response_body = models.TextField(null=True, blank=True)
    last_attempt_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(db_default=ClockTimestamp())
    updated_at = models.DateTimeField(db_default=ClockTimestamp())

    class Meta:
        verbose_name_plural = "webhook deliveries"
        indexes = [
            models.Index(fields=["webhook", "-created_at"], name="delivery_webhook_created_idx"),
            models.Index(fields=["status", "next_retry_at"], name="delivery_status_due_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.event_type} → {self.url} ({self.status})"
