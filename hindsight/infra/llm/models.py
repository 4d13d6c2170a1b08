"""The LLM request log: one row per HTTP request the gateway sent to the provider.

Kept apart from operations and history (the seed: raw prompts and responses are "stored
separately and expire on their own retention schedule"): rows older than
``HINDSIGHT_API_LLM_REQUEST_LOG_RETENTION_HOURS`` are deleted by the ``llm.purge_requests`` beat
task. ``bank_id`` is a plain string, not a foreign key: a request may belong to no bank, and a
log row outliving its bank until the purge is harmless.
"""

from __future__ import annotations

import uuid

from django.db import models

from hindsight.infra.db import ClockTimestamp

SUCCESS = "success"
ERROR = "error"


class LLMRequest(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    bank_id = models.CharField(max_length=255, null=True, blank=True)
    # The operation type (retain, consolidation, refresh_mental_model) or "reflect".
    operation = models.CharField(max_length=64, null=True, blank=True)
    operation_id = models.UUIDField(null=True, blank=True)
    # What the call was for inside the operation (the gateway's ``purpose``).
    scope = models.CharField(max_length=128, blank=True, default="")
    kind = models.CharField(max_length=16, default="chat")  # chat | structured
    # A structured request's step: json_schema (the server enforces the schema), json_object (JSON
    # mode, the schema in the prompt) or prompt (the schema in the prompt alone); "" for chat.
    structured_step = models.CharField(max_length=16, blank=True, default="")
    provider = models.CharField(max_length=32, default="openai")
    model = models.CharField(max_length=255, blank=True, default="")
    status = models.CharField(max_length=16, choices=[(SUCCESS, SUCCESS), (ERROR, ERROR)])
    attempt = models.PositiveIntegerField(default=1)
    started_at = models.DateTimeField()
    ended_at = models.DateTimeField(db_default=ClockTimestamp())
    duration_ms = models.PositiveIntegerField(default=0)
    input_tokens = models.PositiveIntegerField(default=0)
    output_tokens = models.PositiveIntegerField(default=0)
    # Prompt and response, each cut to HINDSIGHT_API_LLM_REQUEST_LOG_MAX_CHARS characters.
    prompt = models.TextField(blank=True, default="")
    response = models.TextField(blank=True, default="")
    truncated = models.BooleanField(default=False)
    error = models.TextField(null=True, blank=True)

    class Meta:
        ordering = ["-started_at", "-id"]
        indexes = [
            models.Index(fields=["bank_id", "-started_at"], name="llmrequest_bank_started_idx"),
            models.Index(fields=["started_at"], name="llmrequest_started_idx"),
            models.Index(fields=["operation_id"], name="llmrequest_operation_idx"),
            # A bank's spend in a window (hindsight.banks.budget) in an index-only scan.
            models.Index(fields=["bank_id", "started_at"], include=["input_tokens", "output_tokens"],
                         name="llmrequest_bank_spend_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.operation or '-'} {self.scope} {self.status} ({self.started_at})"

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens
