"""Mental models and their history: the rows the API, the refresh pipeline and reflect share.

``MentalModel`` holds one user-curated document per (bank, id): its configuration (name, source
query, tags, trigger), the document itself (``content`` markdown and the structured ``document``
delta mode edits), the two clocks (docs/behaviour.md#two-clocks: ``last_refreshed_at`` wall clock,
``last_memory_seen_at`` watermark in the memories' ``updated_at`` clock), the failure flag that
pauses automatic refreshes, the last ``reflect_response`` and the lazily computed embedding that
reflect ranks models by. ``MentalModelHistory`` is the change log: a ``version`` entry per content
change and a ``failure`` entry per failed refresh attempt (docs/behaviour.md#history).
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib.postgres.fields import ArrayField
from django.contrib.postgres.indexes import GinIndex
from django.db import models
from django.db.models import Q
from pgvector.django import VectorField

from hindsight.banks.models import Bank
from hindsight.infra.db import ClockTimestamp


class HistoryKind(models.TextChoices):
    """A history entry: a stored version of the content, or a failed refresh attempt (each label
    is its value; ``refresh_failed`` is upstream 1.1.0's kind for a failure record)."""

    VERSION = "version", "version"
    FAILURE = "refresh_failed", "refresh_failed"


HISTORY_KINDS: tuple[str, ...] = tuple(HistoryKind.values)


class VersionCause(models.TextChoices):
    """What made a version entry's change, when it was not a refresh applied as it ran (its
    ``reason``; null for that): a clear, a restore, an approved proposal."""

    CLEARED = "cleared", "cleared"
    RESTORED = "restored", "restored"
    APPROVED = "approved", "approved"


# The paused models (docs/behaviour.md#retries-and-the-pause), as a filter: a final failure that was
# not transient.
PAUSED = Q(last_refresh_failed_at__isnull=False, last_refresh_failure_transient=False)


class MentalModel(models.Model):
    uid = models.BigAutoField(primary_key=True)
    bank = models.ForeignKey(Bank, on_delete=models.CASCADE, related_name="mental_models")
    # The wire ``id``: unique within its bank, ``^[a-z0-9][a-z0-9-]{0,63}$``.
    mental_model_id = models.CharField(max_length=64)
    name = models.TextField()
    source_query = models.TextField()
    content = models.TextField(default="", blank=True)
    # Structured document (sections of verbatim markdown blocks); ``content`` renders it.
    document = models.JSONField(null=True, blank=True)
    tags = ArrayField(models.TextField(), default=list, blank=True)
    max_tokens = models.IntegerField(default=2048)
    # Normalised trigger: every key present, defaults filled (mentalmodels.triggers).
    trigger = models.JSONField(default=dict, blank=True)

    last_refreshed_at = models.DateTimeField(null=True, blank=True)
    # Watermark: the newest in-scope memory ``updated_at`` the last refresh read (never now()).
    last_memory_seen_at = models.DateTimeField(null=True, blank=True)
    # Set after a refresh's final failed attempt, cleared by a success. With a permanent failure
    # (the provider refused the request or its answer could not be used) the model is paused:
    # automatic triggers skip it. A transient one (429, 5xx, timeouts, connection errors; the
    # flag below) does not pause: automatic refreshes back off instead (the fields after it).
    last_refresh_failed_at = models.DateTimeField(null=True, blank=True)
    last_refresh_failure_transient = models.BooleanField(default=False)
    # Transient final failures in a row since the last success, and until when automatic
    # refreshes wait because of them (mentalmodels.refresh.failure_class).
    refresh_failure_streak = models.PositiveIntegerField(default=0)
    auto_refresh_not_before = models.DateTimeField(null=True, blank=True)
    last_full_refreshed_at = models.DateTimeField(null=True, blank=True)
    # Set when a refresh failed only because no LLM is configured (not a pause): the first
    # process with an LLM queues the refresh it was owed (mentalmodels.refresh.awaiting_llm).
    awaiting_llm_since = models.DateTimeField(null=True, blank=True)
    # The cron tick has handled every refresh_cron / full_refresh_cron fire up to this instant
    # (queued, parked, or skipped as fresh or paused), so a fire is acted on once, at its time,
    # and a model that turns stale later waits for the next fire (mentalmodels.triggers_auto).
    cron_checked_at = models.DateTimeField(null=True, blank=True)
    # The source query the last refresh ran with (delta falls back to full when it changed).
    last_refresh_source_query = models.TextField(null=True, blank=True)
    created_at = models.DateTimeField(db_default=ClockTimestamp())
    updated_at = models.DateTimeField(db_default=ClockTimestamp())

    # text, outcome, based_on, mental_models, structured_output?, trace?
    reflect_response = models.JSONField(null=True, blank=True)

    # Filled lazily by reflect's mental-model search (seed 004): re-embedded when the content
    # hash or the embedding profile no longer matches.
    embedding = VectorField(dimensions=settings.HINDSIGHT.embeddings_dimensions, null=True, blank=True)
    embedding_model = models.CharField(max_length=255, default="", blank=True)
    embedding_dimensions = models.IntegerField(null=True, blank=True)
    embedding_content_hash = models.CharField(max_length=64, default="", blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["bank", "mental_model_id"], name="mental_model_bank_id_uniq"
            ),
        ]
        indexes = [
            # The list order: last_refreshed_at DESC, id DESC within a bank.
            models.Index(
                "bank",
                models.F("last_refreshed_at").desc(),
                models.F("mental_model_id").desc(),
                name="mental_model_list_idx",
            ),
            GinIndex(fields=["tags"], name="mental_model_tags_gin"),
            # Every cron tick asks which models wait for an LLM: almost always none, so a
            # partial index keeps that question free of a table scan.
            models.Index(
                fields=["awaiting_llm_since"],
                condition=models.Q(awaiting_llm_since__isnull=False),
                name="mental_model_awaiting_llm_idx",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.bank_id}/{self.mental_model_id}"

    @property
    def paused(self) -> bool:
        """docs/behaviour.md#retries-and-the-pause: the last refresh failed for good, permanently
        (``PAUSED`` in SQL)."""
        return self.last_refresh_failed_at is not None and not self.last_refresh_failure_transient

    @property
    def is_knowledge_page(self) -> bool:
        """Whether a knowledge-base page holds this model (the one-to-one ``knowledge_node`` of
        ``mentalmodels.knowledge``): one probe of its unique index."""
        return MentalModel.objects.filter(uid=self.uid, knowledge_node__isnull=False).exists()


class MentalModelHistory(models.Model):
    model = models.ForeignKey(MentalModel, on_delete=models.CASCADE, related_name="history")
    kind = models.CharField(max_length=16, choices=HistoryKind.choices)
    changed_at = models.DateTimeField(db_default=ClockTimestamp())
    # Version entries: the content before the change ("" for the first refresh) and its
    # structured document (null before it was kept, or for a page without one): what a restore
    # puts back (docs/behaviour.md#restore). The content after the change is the next version's
    # previous content, or the model's current one (docs/behaviour.md#history).
    previous_content = models.TextField(null=True, blank=True)
    previous_document = models.JSONField(null=True, blank=True)
    # Slim: only based_on and trace of the replaced reflect_response.
    previous_reflect_response = models.JSONField(null=True, blank=True)
    # Failure entries: the attempt's outcome (a refresh_failed_* value), why it failed (its
    # failure_reason) and the exception text (the wire's error_message). Version entries keep
    # what made the change in ``reason``: null for a refresh, else a ``VersionCause``.
    outcome = models.CharField(max_length=64, null=True, blank=True)
    reason = models.TextField(null=True, blank=True)
    exception = models.TextField(null=True, blank=True)
    operation_id = models.UUIDField(null=True, blank=True)

    #: Not stored: a version's change in the one change shape, set by the history read
    #: (``mentalmodels.selectors.mental_model_history``).
    changes: dict[str, Any] | None = None

    class Meta:
        indexes = [
            models.Index(
                "model", "kind", models.F("changed_at").desc(), name="mm_history_model_kind_idx"
            ),
        ]
        verbose_name_plural = "mental model history"

    def __str__(self) -> str:
        return f"{self.kind} of {self.model_id} at {self.changed_at}"
