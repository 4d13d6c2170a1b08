"""A bank written out as an archive (``mentalmodels.transfer.archive``), streamed from the database.

One REPEATABLE READ transaction reads the whole bank, so the archive is one snapshot: a model's
watermark and the memories it was compared with come from the same instant (a model fresh at
export reads fresh after import). Every table is read through a server-side cursor a batch at a
time and written entry by entry into a local file; nothing grows with the bank but the file
(the ZIP's directory: one small record per document).

Memories become upstream's documents: the facts of one ``document_id`` are one document, in
``(created_at, id)`` order, and the facts retained without a document ride in synthetic
documents of ``UNDOCUMENTED_PER_DOCUMENT`` named ``UNDOCUMENTED_PREFIX…`` (this server's import
gives them no document id back). A document's ``Document`` row (its text as chunks, tags,
metadata, retain parameters) rides in its entry, read with its first fact; a row no live fact
names is written after them, with no facts. An observation names its sources by ``(document, ordinal)``,
which the same numbering computes in SQL; one whose sources are gone is left out and counted.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import IO, Any

from django.db import connection, transaction

from hindsight.banks.models import Bank, Document, InvalidatedMemoryUnit
from hindsight.infra.llm.models import LLMRequest
from hindsight.infra.vocabulary import FactType
from hindsight.webhooks.models import Webhook
from mentalmodels.directives.models import Directive, DirectiveScopeStamp
from mentalmodels.knowledge.models import KnowledgeNode
from mentalmodels.models import HistoryKind, MentalModel, MentalModelHistory
from mentalmodels.transfer import archive
from mentalmodels.transfer.archive import ArchiveWriter

UNDOCUMENTED_PREFIX = "hindsight-undocumented-"
UNDOCUMENTED_PER_DOCUMENT = 500
_BATCH = 2000
# Upstream lists only its "pinned" models (the ones its API creates).
UPSTREAM_SUBTYPE = "pinned"

Progress = Callable[[dict[str, Any]], None]


@dataclass(frozen=True)
class Scope:
    """What an archive carries (upstream's three flags)."""

    data: bool = True
    bank_config: bool = True
    history: bool = False

    def as_json(self) -> dict[str, bool]:
        return {"data": self.data, "bank_config": self.bank_config, "history": self.history}


# Facts numbered as the archive lists them: a real document's facts by (created_at, id), the
# undocumented ones in groups; ``doc`` and ``ordinal`` are an observation's source reference.
_NUMBERED_FACTS = f"""
    SELECT m.*, CASE WHEN m.document_id IS NULL
                     THEN '{UNDOCUMENTED_PREFIX}' || lpad((m.rn / {UNDOCUMENTED_PER_DOCUMENT})::text, 6, '0')
                     ELSE m.document_id END AS doc,
           CASE WHEN m.document_id IS NULL THEN m.rn %% {UNDOCUMENTED_PER_DOCUMENT} ELSE m.rn END
               AS ordinal
    FROM (SELECT u.id, u.text, u.context, u.fact_type, u.tags, u.document_id, u.metadata,
                 u.entities, u.occurred_start, u.occurred_end, u.mentioned_at, u.consolidated_at,
                 u.created_at, u.updated_at,
                 row_number() OVER (PARTITION BY u.document_id ORDER BY u.created_at, u.id) - 1
                     AS rn
          FROM banks_memoryunit u
          WHERE u.bank_id = %s AND u.fact_type <> '{FactType.OBSERVATION}') m
"""

# A document's row rides on its first fact only (the join matches ``rn = 0``), so its text is
# read once however many facts the document has.
_DOCUMENT_COLUMNS = ("d.id, d.chunks, d.content_hash, d.retain_params, d.tags, d.metadata, "
                     "d.created_at, d.updated_at")
_FACTS_SQL = f"""
    SELECT f.*, {_DOCUMENT_COLUMNS}
    FROM ({_NUMBERED_FACTS}) f
    LEFT JOIN banks_document d
        ON f.rn = 0 AND d.bank_id = %s AND d.document_id = f.document_id
    ORDER BY f.document_id NULLS LAST, f.rn
"""
_FACT_COLUMNS = 17

# The document rows no live fact names (every fact deleted or invalidated, or none extracted).
_FACTLESS_DOCUMENTS_SQL = f"""
    SELECT d.document_id, {_DOCUMENT_COLUMNS}
    FROM banks_document d
    WHERE d.bank_id = %s AND NOT EXISTS (
        SELECT 1 FROM banks_memoryunit u
        WHERE u.bank_id = d.bank_id AND u.document_id = d.document_id
          AND u.fact_type <> '{FactType.OBSERVATION}')
    ORDER BY d.document_id
"""

_OBSERVATIONS_SQL = f"""
    WITH f AS MATERIALIZED ({_NUMBERED_FACTS})
    SELECT o.id, o.text, o.tags, o.created_at, o.updated_at, o.occurred_start, o.occurred_end,
           o.mentioned_at, o.consolidated_at, bool_and(f.doc IS NOT NULL),
           json_agg(json_build_object('document_id', f.doc, 'fact_index', f.ordinal)
                    ORDER BY s.ord)
    FROM banks_memoryunit o
    CROSS JOIN LATERAL unnest(o.source_memory_ids) WITH ORDINALITY AS s(sid, ord)
    LEFT JOIN f ON f.id = s.sid
    WHERE o.bank_id = %s AND o.fact_type = '{FactType.OBSERVATION}'
    GROUP BY o.id
    ORDER BY o.created_at, o.id
"""


def _rows(sql: str, params: list[Any]) -> Iterator[tuple[Any, ...]]:
    """A query's rows from a server-side cursor, a batch at a time."""
    with connection.chunked_cursor() as cursor:
        cursor.execute(sql, params)
        while batch := cursor.fetchmany(_BATCH):
            yield from batch


def _json(value: Any) -> Any:
    # A raw cursor hands jsonb back as its text (Django's JSONField parses it, not psycopg).
    return json.loads(value) if isinstance(value, str) else value


def _string_metadata(metadata: Any) -> dict[str, str]:
    # Upstream's facts carry string metadata only; a value of another type travels as its JSON.
    if not isinstance(metadata, dict):
        return {}
    return {str(k): v if isinstance(v, str) else archive.dumps(v).decode() for k, v in metadata.items()}


def _document_head(doc: str, row: tuple[Any, ...] | None, first_fact_created_at: Any, *,
                   undocumented: bool = False) -> dict[str, Any]:
    """A document entry's fields but its facts: a document with a row carries the row as
    upstream names it (``original_text``, ``chunks`` of ``{chunk_index, chunk_text}``,
    ``retain_params``, ``tags``, ``created_at``, ``content_hash``, ``updated_at``) and this
    server's ``metadata``; one only memories name carries no text
    (docs/behaviour.md#bank-transfer)."""
    if row is None or row[0] is None:
        return {"id": doc, "original_text": None,
                "retain_params": {"hindsight": {"undocumented": True}} if undocumented else None,
                "tags": [], "created_at": first_fact_created_at, "chunks": []}
    _pk, chunks, content_hash, retain_params, tags, metadata, created_at, updated_at = row
    chunks = list(chunks or [])
    return {
        "id": doc,
        # Joined as the document's own reads join it (``Document.original_text``).
        "original_text": Document(chunks=chunks).original_text if chunks else None,
        "retain_params": _json(retain_params) or None, "tags": list(tags or []),
        "created_at": created_at,
        "chunks": [{"chunk_index": index, "chunk_text": text} for index, text in enumerate(chunks)],
        "content_hash": content_hash or None, "updated_at": updated_at,
        "metadata": _json(metadata) or {},
    }


def _fact(row: tuple[Any, ...]) -> dict[str, Any]:
    (uid, text, context, fact_type, tags, _document_id, metadata, entities, occurred_start,
     occurred_end, mentioned_at, consolidated_at, created_at, updated_at, _rn, _doc,
     _ordinal) = row[:_FACT_COLUMNS]
    metadata = _json(metadata)
    fact = {
        "text": text, "source_id": str(uid), "fact_type": fact_type, "context": context or "",
        "event_date": occurred_start or mentioned_at or created_at,
        "occurred_start": occurred_start, "occurred_end": occurred_end,
        "mentioned_at": mentioned_at, "metadata": _string_metadata(metadata),
        "tags": list(tags or []), "observation_scopes": None, "chunk_index": None,
        "entities": list(entities or []), "causal_relations": [],
        "created_at": created_at, "consolidated_at": consolidated_at,
        "consolidation_failed_at": None,
        # This server's clock of the memory (docs/behaviour.md#two-clocks): carried so a model's
        # watermark compares with the same stamps after the import.
        "updated_at": updated_at,
    }
    if isinstance(metadata, dict) and any(not isinstance(v, str) for v in metadata.values()):
        fact["hindsight_metadata"] = metadata
    return fact


class _Exporter:
    def __init__(self, *, bank: Bank, scope: Scope, writer: ArchiveWriter,
                 progress: Progress | None):
        self.bank, self.scope, self.writer = bank, scope, writer
        self.progress = progress or (lambda _: None)
        self.counts: dict[str, int] = {}

    # -- memories --------------------------------------------------------------------------------

    def documents(self) -> None:
        total = self.bank.memories.exclude(fact_type=FactType.OBSERVATION).count()
        facts = documents = 0
        for doc, group in itertools.groupby(_rows(_FACTS_SQL, [self.bank.id, self.bank.id]),
                                            key=lambda r: r[15]):
            first = next(group)
            head = _document_head(doc, first[_FACT_COLUMNS:], first[12],
                                  undocumented=first[5] is None)
            with self.writer.entry(f"{archive.DOCUMENTS_PREFIX}{documents:06d}.json") as out:
                # The facts are streamed into the document's list, never held together.
                out.write(archive.dumps(head)[:-1] + b', "facts": [')
                for index, row in enumerate(itertools.chain([first], group)):
                    out.write(b"," if index else b"")
                    out.write(archive.dumps(_fact(row)))
                    facts += 1
                    if facts % 10_000 == 0:
                        self.progress({"phase": "export", "facts_written": facts,
                                       "facts_total": total})
                out.write(b"]}")
            documents += 1
        for row in _rows(_FACTLESS_DOCUMENTS_SQL, [self.bank.id]):
            head = {**_document_head(row[0], row[1:], None), "facts": []}
            self.writer.write_json(f"{archive.DOCUMENTS_PREFIX}{documents:06d}.json", head)
            documents += 1
        self.counts.update(document_count=documents, fact_count=facts)

    def observations(self) -> None:
        def items() -> Iterator[dict[str, Any]]:
            for (uid, text, tags, created_at, updated_at, occurred_start, occurred_end,
                 mentioned_at, consolidated_at, complete, sources) in _rows(
                    _OBSERVATIONS_SQL, [self.bank.id, self.bank.id]):
                sources = _json(sources)
                if not complete or not sources:
                    continue  # a source fact was deleted: no reference could name it
                yield {"source_id": str(uid), "text": text, "created_at": created_at,
                       "tags": list(tags or []),
                       "event_date": occurred_start or mentioned_at or created_at,
                       "occurred_start": occurred_start, "occurred_end": occurred_end,
                       "mentioned_at": mentioned_at, "observation_scopes": None,
                       "proof_count": len(sources), "sources": sources,
                       "updated_at": updated_at, "consolidated_at": consolidated_at}

        total = self.bank.memories.filter(fact_type=FactType.OBSERVATION).count()
        written = self.writer.write_array(archive.OBSERVATIONS, items())
        self.counts["observation_count"] = written
        # Those with a source gone (or none listed: not in the query at all) are left out.
        self.counts["observations_skipped"] = total - written

    def invalidated(self) -> None:
        """The curation archive as upstream's rows: the memory's columns, the invalidation's,
        entities by name; no id (an import gives each a new one) and no vector."""
        rows = (InvalidatedMemoryUnit.objects.filter(bank=self.bank)
                .order_by("invalidated_at", "id").iterator(chunk_size=1000))
        self.counts["invalidated_memory_count"] = self.writer.write_array(
            archive.INVALIDATED_MEMORIES, (_invalidated_row(row) for row in rows))

    # -- what the bank wrote from its memories -------------------------------------------------------

    def mental_models(self) -> None:
        models = MentalModel.objects.filter(bank=self.bank).order_by("uid")
        pages = set(KnowledgeNode.objects.filter(bank=self.bank, mental_model__isnull=False)
                    .values_list("mental_model_id", flat=True))
        standalone = 0

        def rows() -> Iterator[dict[str, Any]]:
            nonlocal standalone
            for model in models.iterator(chunk_size=500):
                standalone += model.uid not in pages
                yield _model_row(model)

        self.writer.write_array(archive.MENTAL_MODELS, rows())
        self.counts["mental_model_count"] = standalone
        history = (MentalModelHistory.objects.filter(model__bank=self.bank)
                   .select_related("model").order_by("changed_at", "id"))
        self.counts["mental_model_history_count"] = self.writer.write_array(
            archive.MENTAL_MODEL_HISTORY,
            (_history_row(entry) for entry in history.iterator(chunk_size=1000)))
        self.counts["knowledge_page_count"] = self.writer.write_array(
            archive.KNOWLEDGE_PAGES, _knowledge_rows(self.bank.id))

    # -- the bank's set-up -----------------------------------------------------------------------------

    def bank_config(self) -> None:
        bank = self.bank
        self.writer.write_array(archive.BANKS, [{
            "bank_id": bank.id, "name": bank.name, "mission": bank.mission,
            "disposition": bank.disposition or {}, "config": bank.config or {},
            "created_at": bank.created_at, "updated_at": bank.updated_at,
        }])
        directives = Directive.objects.filter(bank=bank).order_by("created_at", "id")
        self.counts["directive_count"] = self.writer.write_array(archive.DIRECTIVES, (
            {"id": d.id, "bank_id": bank.id, "name": d.name, "content": d.content,
             "priority": d.priority, "is_active": d.is_active, "tags": list(d.tags),
             "created_at": d.created_at, "updated_at": d.updated_at}
            for d in directives.iterator(chunk_size=500)))
        self.writer.write_array(archive.DIRECTIVE_STAMPS, (
            {"tags": list(s.tags), "changed_at": s.changed_at}
            for s in DirectiveScopeStamp.objects.filter(bank=bank).order_by("id")))
        # Upstream's webhook rows, the secret with them: a restored bank signs as it did.
        webhooks = Webhook.objects.filter(bank=bank).order_by("created_at", "id")
        self.counts["webhook_count"] = self.writer.write_array(archive.WEBHOOKS, (
            {"id": w.id, "bank_id": bank.id, "url": w.url, "secret": w.secret,
             "event_types": list(w.event_types), "enabled": w.enabled,
             "http_config": w.http_config or {}, "created_at": w.created_at,
             "updated_at": w.updated_at}
            for w in webhooks.iterator(chunk_size=500)))

    def history(self) -> None:
        requests = LLMRequest.objects.filter(bank_id=self.bank.id).order_by("started_at", "id")
        self.counts["llm_request_count"] = self.writer.write_array(
            archive.LLM_REQUESTS, (_llm_request_row(r) for r in requests.iterator(chunk_size=500)))
        self.writer.write_array(archive.AUDIT_LOG, [])

    def manifest(self) -> dict[str, Any]:
        counts = self.counts
        manifest = {
            "schema_version": archive.SCHEMA_VERSION, "source_bank_id": self.bank.id,
            "exported_at": datetime.now(UTC), "archive_type": archive.ARCHIVE_TYPE,
            "document_count": counts.get("document_count", 0),
            "fact_count": counts.get("fact_count", 0),
            "observation_count": counts.get("observation_count", 0),
            "mental_model_count": counts.get("mental_model_count", 0),
            "knowledge_page_count": counts.get("knowledge_page_count", 0),
            "directive_count": counts.get("directive_count", 0),
            "webhook_count": counts.get("webhook_count", 0), "includes_history": self.scope.history,
            "scope": self.scope.as_json(), "attachment_count": 0, "operation_count": 0,
            "invalidated_memory_count": counts.get("invalidated_memory_count", 0),
            "bank_rows_json_encoding": "decoded",
            "producer": archive.PRODUCER,
        }
        self.writer.write_json(archive.MANIFEST, manifest)
        return manifest


def _invalidated_row(row: InvalidatedMemoryUnit) -> dict[str, Any]:
    return {
        "bank_id": row.bank_id, "text": row.text, "context": row.context or None,
        "fact_type": row.fact_type, "document_id": row.document_id, "chunk_index": None,
        "tags": list(row.tags), "metadata": _string_metadata(row.metadata),
        "entity_names": list(row.entities), "event_date": row.occurred_start or row.mentioned_at,
        "occurred_start": row.occurred_start, "occurred_end": row.occurred_end,
        "mentioned_at": row.mentioned_at, "proof_count": 1, "created_at": row.created_at,
        "updated_at": row.updated_at, "consolidated_at": row.consolidated_at,
        "edited_at": row.edited_at, "invalidation_reason": row.invalidation_reason,
        "invalidated_at": row.invalidated_at, "causal_links": [],
    }


def _model_row(model: MentalModel) -> dict[str, Any]:
    row: dict[str, Any] = {
        "id": model.mental_model_id, "bank_id": model.bank_id, "name": model.name,
        "source_query": model.source_query, "content": model.content or "",
        "tags": list(model.tags), "max_tokens": model.max_tokens, "trigger": model.trigger or {},
        "reflect_response": model.reflect_response,
        "last_refreshed_source_query": model.last_refresh_source_query,
        # Upstream's structured document is of another shape: it splits the content itself.
        "structured_content": None, "subtype": UPSTREAM_SUBTYPE,
        "last_memory_seen_at": model.last_memory_seen_at,
        "last_refresh_failed_at": model.last_refresh_failed_at,
        "last_full_refreshed_at": model.last_full_refreshed_at,
        "created_at": model.created_at,
        # This server's columns, under a key upstream's importer does not read.
        "hindsight": {
            "document": model.document, "last_refreshed_at": model.last_refreshed_at,
            "last_refresh_failure_transient": model.last_refresh_failure_transient,
            "refresh_failure_streak": model.refresh_failure_streak,
            "auto_refresh_not_before": model.auto_refresh_not_before,
            "awaiting_llm_since": model.awaiting_llm_since,
            "cron_checked_at": model.cron_checked_at, "updated_at": model.updated_at,
        },
    }
    # Upstream's column is NOT NULL with a default: a model never refreshed leaves it out.
    if model.last_refreshed_at is not None:
        row["last_refreshed_at"] = model.last_refreshed_at
    return row


def _history_row(entry: MentalModelHistory) -> dict[str, Any]:
    if entry.kind == HistoryKind.FAILURE:
        content: dict[str, Any] = {
            "kind": HistoryKind.FAILURE.value, "outcome": entry.outcome,
            "failure_reason": entry.reason, "error_message": entry.exception,
            "operation_id": entry.operation_id,
        }
    else:
        content = {"previous_content": entry.previous_content,
                   "previous_reflect_response": entry.previous_reflect_response}
    return {"mental_model_id": entry.model.mental_model_id, "bank_id": entry.model.bank_id,
            "content": content, "changed_at": entry.changed_at}


def _knowledge_rows(bank_id: str) -> Iterator[dict[str, Any]]:
    """The tree parents first (the order an insert needs)."""
    sql = """
        WITH RECURSIVE tree AS (
            SELECT n.id, n.parent_id, 0 AS depth FROM knowledge_knowledgenode n
            WHERE n.bank_id = %s AND n.parent_id IS NULL
            UNION ALL
            SELECT n.id, n.parent_id, t.depth + 1 FROM knowledge_knowledgenode n
            JOIN tree t ON n.parent_id = t.id
        )
        SELECT n.id, n.parent_id, n.kind, n.name, m.mental_model_id, n.created_at, n.updated_at
        FROM tree JOIN knowledge_knowledgenode n ON n.id = tree.id
        LEFT JOIN mentalmodels_mentalmodel m ON m.uid = n.mental_model_id
        ORDER BY tree.depth, n.created_at, n.id
    """
    for index, (node_id, parent_id, kind, name, model_id, created_at, updated_at) in enumerate(
            _rows(sql, [bank_id])):
        yield {"id": node_id, "parent_id": parent_id, "kind": kind, "name": name,
               "mental_model_id": model_id, "sort_order": index, "managed": False,
               "created_at": created_at, "updated_at": updated_at}


def _llm_request_row(request: LLMRequest) -> dict[str, Any]:
    return {
        "id": request.id, "bank_id": request.bank_id, "operation": request.operation,
        "scope": request.scope, "provider": request.provider, "model": request.model,
        "status": request.status, "started_at": request.started_at,
        "ended_at": request.ended_at, "duration_ms": request.duration_ms,
        "input_tokens": request.input_tokens, "output_tokens": request.output_tokens,
        "total_tokens": request.input_tokens + request.output_tokens,
        "input": request.prompt, "output": request.response, "error": request.error,
        "hindsight": {"operation_id": request.operation_id, "kind": request.kind,
                      "attempt": request.attempt, "truncated": request.truncated},
    }


def bank_export(*, bank_id: str, scope: Scope, out: IO[bytes],
                progress: Progress | None = None) -> dict[str, Any]:
    """Write bank ``bank_id`` as an archive into ``out`` (a seekable local file); the manifest.

    Raises ``Bank.DoesNotExist`` when the bank is gone."""
    writer = ArchiveWriter(out)
    try:
        outermost = not connection.in_atomic_block
        with transaction.atomic():
            with connection.cursor() as cursor:
                if outermost:  # inside a caller's transaction, that one is the snapshot
                    # One snapshot for every read below (the transaction's first statement).
                    cursor.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
                # Every row of every cursor is read: plan for all of them, not the first tenth,
                # and never join by nested loops — with no statistics yet (a bank just
                # imported) the planner took one, and the observations' sources cost minutes.
                cursor.execute("SET LOCAL cursor_tuple_fraction = 1.0")
                cursor.execute("SET LOCAL enable_nestloop = off")
            bank = Bank.objects.get(id=bank_id)
            exporter = _Exporter(bank=bank, scope=scope, writer=writer, progress=progress)
            if scope.data:
                exporter.documents()
                exporter.observations()
                for name in archive.DATA_ENTRIES:
                    writer.write_array(name, [])
                exporter.invalidated()
                exporter.mental_models()
            if scope.bank_config:
                exporter.bank_config()
            if scope.history:
                exporter.history()
            manifest = exporter.manifest()
            manifest["observations_skipped"] = exporter.counts.get("observations_skipped", 0)
            manifest["mental_model_history_count"] = exporter.counts.get(
                "mental_model_history_count", 0)
    finally:
        writer.close()
    return manifest
