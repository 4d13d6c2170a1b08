"""Banks and memory units: the substrate a mental-model refresh reads.

``MemoryUnit.updated_at`` is the one clock for staleness, refresh windows and watermarks. It is
stamped with ``clock_timestamp()`` by the database inside a transaction that holds the bank's
shared write lock (``hindsight.banks.writeclock``), so no write can commit with a stamp at or
below a cutoff a refresh has already taken.
"""

from __future__ import annotations

import uuid

from django.conf import settings
from django.contrib.postgres.fields import ArrayField
from django.contrib.postgres.indexes import GinIndex
from django.contrib.postgres.search import SearchVector, SearchVectorField
from django.db import models
from django.db.models.functions import Left
from pgvector.django import HnswIndex, VectorField

from hindsight.infra.db import ClockTimestamp
from hindsight.infra.vocabulary import FACT_TYPES, FactType, MemoryState

# Characters of text and context that go into the full-text vector. PostgreSQL refuses a
# tsvector over 1 MB (a failed insert); 80,000 characters of any script stay well under it
# (measured: ~400 KB worst case, CJK), and the semantic arm reads only the first 256 tokens.
SEARCH_TEXT_CHARS = 60_000
SEARCH_CONTEXT_CHARS = 20_000


class Bank(models.Model):
    id = models.CharField(primary_key=True, max_length=255)
    name = models.CharField(max_length=255, blank=True, default="")
    mission = models.TextField(blank=True, default="")
    disposition = models.JSONField(default=dict, blank=True)
    # Per-bank overrides (GET/PATCH …/config), e.g. mental_model_min_refresh_interval_seconds.
    config = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(db_default=ClockTimestamp())
    updated_at = models.DateTimeField(db_default=ClockTimestamp())

    class Meta:
        ordering = ["id"]

    def __str__(self) -> str:
        return self.id


class MemoryColumns(models.Model):
    """What a memory says, live (``MemoryUnit``) or in the curation archive
    (``InvalidatedMemoryUnit``), so a memory moves between the two tables field for field."""

    text = models.TextField()
    context = models.TextField(blank=True, default="")
    fact_type = models.CharField(
        max_length=16, choices=[(t, t) for t in FACT_TYPES], default=FactType.WORLD
    )
    tags = ArrayField(models.TextField(), default=list, blank=True)
    document_id = models.CharField(max_length=255, null=True, blank=True)
    metadata = models.JSONField(default=dict, blank=True)
    entities = ArrayField(models.TextField(), default=list, blank=True)
    occurred_start = models.DateTimeField(null=True, blank=True)
    occurred_end = models.DateTimeField(null=True, blank=True)
    mentioned_at = models.DateTimeField(null=True, blank=True)
    # Observations: the facts they were consolidated from.
    source_memory_ids = ArrayField(models.UUIDField(), default=list, blank=True)
    # Null = waiting for consolidation. Marking a fact consolidated does not touch updated_at.
    consolidated_at = models.DateTimeField(null=True, blank=True)
    # When a user last edited the memory (``PATCH …/memories/{id}``); null: as retained.
    edited_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        abstract = True

    #: The fields a memory keeps when it moves to the archive and back.
    @classmethod
    def column_names(cls) -> tuple[str, ...]:
        return tuple(f.name for f in MemoryColumns._meta.get_fields())


class MemoryUnit(MemoryColumns):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    # No index of its own: every read by bank goes through an index that starts with bank_id
    # (below). The foreign key's own (and its varchar_pattern_ops twin) only gave the planner a
    # worse path for "a bank's newest matches" (fetch and sort the whole bank rather than walk
    # memory_bank_updated_idx backwards) and cost every insert two more B-trees.
    bank = models.ForeignKey(
        Bank, on_delete=models.CASCADE, related_name="memories", db_index=False
    )
    created_at = models.DateTimeField(db_default=ClockTimestamp())
    updated_at = models.DateTimeField(db_default=ClockTimestamp())
    embedding = VectorField(dimensions=settings.HINDSIGHT.embeddings_dimensions, null=True)
    # Word pieces in ``text`` (``hindsight.banks.tokens``), counted once when retain writes the
    # row, so recall's token budget does not tokenize every hit again. Null = not counted (a row
    # from before the column, an observation, a text changed since: a trigger clears it, see
    # migration 0004); recall counts those on the fly, so a null never changes a result.
    text_tokens = models.PositiveIntegerField(null=True, blank=True, editable=False)
    search_vector = models.GeneratedField(
        expression=SearchVector(
            Left("text", SEARCH_TEXT_CHARS), Left("context", SEARCH_CONTEXT_CHARS),
            config="english",
        ),
        output_field=SearchVectorField(),
        db_persist=True,
    )

    class Meta:
        indexes = [
            models.Index(fields=["bank", "updated_at"], name="memory_bank_updated_idx"),
            models.Index(fields=["bank", "fact_type", "updated_at"], name="memory_bank_type_upd_idx"),
            # A document's memories (its page, its deletion, a retain that replaces it); only
            # the memories retained with a document are in it.
            models.Index(fields=["bank", "document_id"], name="memory_bank_document_idx",
                         condition=models.Q(document_id__isnull=False)),
            # Bank first (btree_gin): a bank's bitmap is its own rows, not every bank's matches.
            GinIndex(fields=["bank", "tags"], name="memory_bank_tags_gin"),
            GinIndex(fields=["bank", "search_vector"], name="memory_bank_fts_gin"),
            HnswIndex(
                name="memory_embedding_hnsw",
                fields=["embedding"],
                m=16,
                ef_construction=64,
                opclasses=["vector_cosine_ops"],
            ),
        ]

    def __str__(self) -> str:
        return f"{self.fact_type}: {self.text[:60]}"



class InvalidatedMemoryUnit(MemoryColumns):
    """The curation archive: a memory a user invalidated, moved out of ``MemoryUnit`` under the
    same id, so recall, consolidation and every mental model's scope read only live memories
    without a state filter (docs/behaviour.md#invalidated-memories). No vector: restoring it
    embeds the text again."""

    id = models.UUIDField(primary_key=True, editable=False)
    bank = models.ForeignKey(
        Bank, on_delete=models.CASCADE, related_name="invalidated_memories", db_index=False
    )
    created_at = models.DateTimeField()
    # The memory's last write while it was live.
    updated_at = models.DateTimeField()
    invalidation_reason = models.TextField(null=True, blank=True)
    invalidated_at = models.DateTimeField()

    class Meta:
        indexes = [
            models.Index(fields=["bank", "invalidated_at"], name="invalidated_bank_at_idx"),
            models.Index(fields=["bank", "document_id"], name="invalidated_bank_doc_idx"),
        ]

    # What the API calls the curation state of a memory resting here (a live one is "valid").
    state = MemoryState.INVALIDATED

    def __str__(self) -> str:
        return f"invalidated {self.fact_type}: {self.text[:60]}"


class MemoryChange(models.Model):
    """One curation change of a memory: edited, invalidated, restored or deleted, with what the
    memory was before it (its tags and fact type say which mental-model scopes held it).

    Staleness and a refresh's scope check read these rows beside the memories
    (docs/behaviour.md#staleness): a removal leaves no memory whose ``updated_at`` could say
    it happened, so the change row's ``changed_at`` does. The memory's history and its
    document's history read them too. ``changed_at`` is stamped under the bank's write lock,
    like every memory write (docs/behaviour.md#the-snapshot-cutoff).
    """

    id = models.BigAutoField(primary_key=True)
    bank = models.ForeignKey(Bank, on_delete=models.CASCADE, related_name="memory_changes",
                             db_index=False)
    memory_id = models.UUIDField()
    document_id = models.CharField(max_length=255, null=True, blank=True)
    kind = models.CharField(max_length=32)
    # The memory before the change.
    tags = ArrayField(models.TextField(), default=list, blank=True)
    fact_type = models.CharField(max_length=16, choices=[(t, t) for t in FACT_TYPES])
    previous = models.JSONField(default=dict, blank=True)
    reason = models.TextField(null=True, blank=True)
    changed_at = models.DateTimeField()

    class Meta:
        indexes = [
            models.Index(fields=["bank", "changed_at"], name="memchange_bank_at_idx"),
            models.Index(fields=["bank", "memory_id"], name="memchange_bank_memory_idx"),
            models.Index(fields=["bank", "document_id"], name="memchange_bank_doc_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.kind} {self.memory_id}"


class Document(models.Model):
    """A retained document (a retain item with a ``document_id``): its text as retained, one
    chunk per item that wrote it, the retain's parameters (so ``reprocess`` can retain it again)
    and what changed it (docs/behaviour.md#documents). Its memories name it by
    ``MemoryUnit.document_id``."""

    id = models.BigAutoField(primary_key=True)
    bank = models.ForeignKey(Bank, on_delete=models.CASCADE, related_name="documents",
                             db_index=False)
    document_id = models.CharField(max_length=255)
    # The text of each retain item that wrote the document, in order (``replace`` starts over,
    # ``append`` adds one); the original text is their join.
    chunks = ArrayField(models.TextField(), default=list, blank=True)
    content_hash = models.CharField(max_length=64, blank=True, default="")
    retain_params = models.JSONField(default=dict, blank=True)
    tags = ArrayField(models.TextField(), default=list, blank=True)
    metadata = models.JSONField(default=dict, blank=True)
    # Newest last: {kind, created_at, operation_id, facts_added, facts_removed} (bounded).
    events = models.JSONField(default=list, blank=True)
    created_at = models.DateTimeField()
    updated_at = models.DateTimeField()
    # Set by the selectors that read a document with its live memories counted.
    memory_unit_count: int
    nodes_by_fact_type: dict[str, int]

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["bank", "document_id"], name="document_bank_id_uniq"),
        ]
        indexes = [models.Index(fields=["bank", "updated_at"], name="document_bank_updated_idx")]

    def __str__(self) -> str:
        return self.document_id

    @property
    def original_text(self) -> str:
        return "\n\n".join(self.chunks)
