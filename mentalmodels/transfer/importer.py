"""An archive written into a bank: a restore (a whole new bank) or a merge (documents into a bank).

Three passes over the archive, each reading it entry by entry:

1. **Check** the small entries before anything is written: the bank row's config overrides,
   every model's id and trigger, the knowledge tree, the directives. A problem fails the import
   naming the entry and the rule.
2. **Embed** every fact and observation with this server's embedder, outside any transaction
   (no network call holds a lock), into a local file of float32 vectors in archive order. No LLM
   is called.
3. **Write** in one transaction: the bank, the memories (their vectors read back from the file
   in the same order) and their documents' rows (each written as its entry is read), the
   models, their history, the tree, the directives, the request log. A failure anywhere rolls
   all of it back: no half bank is left.

Ids: memories get new ids, derived (uuid5 under a namespace drawn per import) from their place
in the archive, so an observation's ``(document, ordinal)`` sources and a model's evidence are
resolved without a map of every memory; only the ids the models cite are kept in memory.
Models keep their ids (unique per bank); knowledge nodes and directives keep theirs unless the
id is taken on this server (a clone), when they get fresh ones.

Freshness (docs/behaviour.md#bank-transfer): a restore writes each memory's ``updated_at`` as
the archive carries it (upstream's archives carry none: their ``created_at`` stands in), and
each model's watermark as it was, both capped at the import's own write stamp — the bank did
not exist before this transaction, so no refresh can have taken a cutoff in between. A model
fresh at export reads fresh after the import. A merge writes into a live bank: its memories
are stamped now, like any write.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import tempfile
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import numpy as np
from django.conf import settings
from django.db import IntegrityError, connection, transaction
from psycopg.types.json import Jsonb

from hindsight.banks import bankconfig
from hindsight.banks.models import Bank, Document, InvalidatedMemoryUnit, MemoryUnit
from hindsight.banks.services import bank_config_update, bank_id_validate
from hindsight.banks.tokens import count_tokens_to_store
from hindsight.banks.writeclock import hold_bank_write_lock
from hindsight.infra.db import vector_literal
from hindsight.infra.embeddings import get_embedder
from hindsight.infra.errors import BadRequest, FieldError, FieldErrors
from hindsight.infra.llm.models import LLMRequest
from hindsight.infra.vocabulary import FACT_TYPES, FactType
from hindsight.webhooks.models import Webhook
from mentalmodels.directives.models import Directive, DirectiveScopeStamp
from mentalmodels.knowledge.models import KnowledgeNode, NodeKind
from mentalmodels.models import HistoryKind, MentalModel, MentalModelHistory
from mentalmodels.services import mental_model_id_problem
from mentalmodels.transfer import archive
from mentalmodels.transfer.archive import ArchiveInvalid, ArchiveReader
from mentalmodels.transfer.exporter import UNDOCUMENTED_PREFIX, Scope
from mentalmodels.triggers import trigger_normalize

RESTORE, MERGE = "restore", "merge"
MODES = (RESTORE, MERGE)
CONFLICT_RULES = ("skip", "replace", "new-id")
_EMBED_BATCH = 256
_WRITE_BATCH = 500
# Document rows hold their whole text: written a few at a time.
_DOCUMENT_BATCH = 50
_COPY_MEMORIES = (
    "COPY banks_memoryunit (id, bank_id, text, context, fact_type, tags, document_id, metadata, "
    "entities, occurred_start, occurred_end, mentioned_at, source_memory_ids, consolidated_at, "
    "created_at, updated_at, embedding, text_tokens) FROM STDIN")
_UUID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")
_JSON_COLUMNS = {"disposition", "config", "trigger", "reflect_response", "structured_content",
                 "content", "input", "output", "metadata"}

Progress = Callable[[dict[str, Any]], None]


class TargetExists(BadRequest):
    """A restore names a bank that exists: refused, the bank untouched."""


@dataclass(frozen=True)
class ImportRequest:
    mode: str = RESTORE
    target_bank_id: str | None = None
    scope: Scope = field(default_factory=Scope)
    document_conflict: str = "skip"


def target_exists_message(bank_id: str) -> str:
    return (f"target bank '{bank_id}' already exists: a restore writes a new bank and never "
            "into one that exists (delete it first, pass another target_bank_id, or use "
            "mode=merge)")


def archive_open(path: str, *, mode: str = RESTORE) -> ArchiveReader:
    return ArchiveReader(path, max_unpacked=settings.HINDSIGHT.transfer_max_unpacked_bytes,
                         require_bank=mode == RESTORE)


def _archive_scope(manifest: dict[str, Any]) -> Scope:
    declared = manifest.get("scope")
    if isinstance(declared, dict):
        return Scope(data=bool(declared.get("data", True)),
                     bank_config=bool(declared.get("bank_config", True)),
                     history=bool(declared.get("history", False)))
    return Scope(history=bool(manifest.get("includes_history", False)))


def _decoded(row: dict[str, Any], serialized: bool) -> dict[str, Any]:
    """A row with its JSON columns as values (an upstream ``serialized`` archive holds them as
    JSON text)."""
    if not serialized:
        return row
    out = dict(row)
    for key in _JSON_COLUMNS & out.keys():
        if isinstance(out[key], str):
            try:
                out[key] = json.loads(out[key])
            except ValueError:
                pass
    return out


def _when(value: Any, where: str) -> datetime | None:
    if value is None or isinstance(value, datetime):
        return value
    if isinstance(value, str):
        try:
            parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            parsed = None
        if parsed is not None and parsed.tzinfo is not None:
            return parsed
    raise ArchiveInvalid(f"{where}: {value!r} is not an ISO 8601 date-time with a time zone")


def _problems(exc: FieldError | FieldErrors) -> str:
    problems = []
    for error in exc.errors:
        loc: Any = error.get("loc") or []
        problems.append(f"{'.'.join(str(part) for part in loc)}: {error.get('msg')}")
    return "; ".join(problems)


@dataclass
class _Plan:
    """What the check pass read: the small entries, checked, and what the write pass needs."""

    manifest: dict[str, Any]
    restoring: Scope
    source_bank_id: str
    target_bank_id: str
    serialized: bool
    bank_row: dict[str, Any] | None = None
    config: dict[str, Any] = field(default_factory=dict)
    models: list[dict[str, Any]] = field(default_factory=list)
    nodes: list[dict[str, Any]] = field(default_factory=list)
    directives: list[dict[str, Any]] = field(default_factory=list)
    webhooks: list[dict[str, Any]] = field(default_factory=list)
    cited: set[str] = field(default_factory=set)
    facts_total: int = 0


class _Import:
    def __init__(self, reader: ArchiveReader, request: ImportRequest, progress: Progress | None):
        self.reader = reader
        self.request = request
        self.progress = progress or (lambda _: None)
        self.namespace = uuid.uuid4()
        self.counts: dict[str, int] = {}
        # A merge's document ids, as written (None: the document was skipped).
        self.decisions: dict[str, str | None] = {}
        manifest = reader.manifest
        archive_scope = _archive_scope(manifest)
        wanted = request.scope
        source = manifest["source_bank_id"]
        self.plan = _Plan(
            manifest=manifest,
            restoring=Scope(data=wanted.data and archive_scope.data,
                            bank_config=wanted.bank_config and archive_scope.bank_config,
                            history=wanted.history and archive_scope.history),
            source_bank_id=source,
            target_bank_id=request.target_bank_id or source,
            serialized=manifest.get("bank_rows_json_encoding") == "serialized",
        )

    # -- ids ------------------------------------------------------------------------------------------

    def fact_id(self, doc: str, ordinal: int) -> uuid.UUID:
        return uuid.uuid5(self.namespace, f"f\x00{doc}\x00{ordinal}")

    def observation_id(self, index: int) -> uuid.UUID:
        return uuid.uuid5(self.namespace, f"o\x00{index}")

    # -- 1. check ----------------------------------------------------------------------------------

    def check(self) -> None:
        plan = self.plan
        try:
            bank_id_validate(plan.target_bank_id, loc=("query", "target_bank_id"))
        except FieldError as exc:
            raise ArchiveInvalid(_problems(exc)) from exc
        if self.request.mode == RESTORE and plan.restoring.bank_config:
            rows = self.reader.read_json(archive.BANKS, [])
            if not isinstance(rows, list) or len(rows) > 1 or (rows and not isinstance(rows[0], dict)):
                raise ArchiveInvalid("banks.json is not a list of one bank row")
            plan.bank_row = _decoded(rows[0], plan.serialized) if rows else None
            plan.config = self._config(plan.bank_row or {})
            plan.directives = [self._directive(i, _decoded(r, plan.serialized)) for i, r in
                               enumerate(self.reader.iter_array(archive.DIRECTIVES))]
            plan.webhooks = [self._webhook(i, _decoded(r, plan.serialized)) for i, r in
                             enumerate(self.reader.iter_array(archive.WEBHOOKS))]
        if self.request.mode == RESTORE and plan.restoring.data:
            plan.models = [self._model(i, _decoded(r, plan.serialized)) for i, r in
                           enumerate(self.reader.iter_array(archive.MENTAL_MODELS))]
            ids = {m["id"] for m in plan.models}
            plan.nodes = _parents_first(
                [self._node(i, r, ids) for i, r in
                 enumerate(self.reader.iter_array(archive.KNOWLEDGE_PAGES))])
            for model in plan.models:
                plan.cited |= _cited_ids(model.get("reflect_response"))
            for row in self.reader.iter_array(archive.MENTAL_MODEL_HISTORY):
                content = _decoded(row, plan.serialized).get("content") if isinstance(row, dict) else None
                if isinstance(content, dict):
                    plan.cited |= _cited_ids(content.get("previous_reflect_response"))
        plan.facts_total = int(plan.manifest.get("fact_count") or 0) + int(
            plan.manifest.get("observation_count") or 0)

    def _config(self, row: dict[str, Any]) -> dict[str, Any]:
        config = dict(row.get("config") or {})
        if not isinstance(row.get("config") or {}, dict):
            raise ArchiveInvalid("banks.json: config is not a JSON object")
        # Upstream keeps a mission and traits on the row too; here the config is their one home.
        mission = row.get("mission")
        if isinstance(mission, str) and mission and "reflect_mission" not in config:
            config["reflect_mission"] = mission
        disposition = row.get("disposition")
        if isinstance(disposition, dict):
            for trait, value in disposition.items():
                if value != 3:  # upstream's default trait value: only what was changed
                    config.setdefault(f"disposition_{trait}", value)
        try:
            return bankconfig.validate_updates(config, loc=("banks.json", "config"))
        except (FieldError, FieldErrors) as exc:
            raise ArchiveInvalid(_problems(exc)) from exc

    def _model(self, index: int, row: Any) -> dict[str, Any]:
        where = f"mental_models.json[{index}]"
        if not isinstance(row, dict):
            raise ArchiveInvalid(f"{where} is not an object")
        problem = mental_model_id_problem(row.get("id"))
        if problem:
            raise ArchiveInvalid(f"{where}.id {problem}")
        for key in ("name", "source_query"):
            if not isinstance(row.get(key), str) or not row[key]:
                raise ArchiveInvalid(f"{where}.{key} must be a non-empty string")
        if not isinstance(row.get("content") or "", str):
            raise ArchiveInvalid(f"{where}.content must be a string")
        tags = row.get("tags") or []
        if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
            raise ArchiveInvalid(f"{where}.tags must be a list of strings")
        try:
            trigger = trigger_normalize(row.get("trigger") or {}, loc=(where, "trigger"))
        except FieldErrors as exc:
            raise ArchiveInvalid(_problems(exc)) from exc
        return {**row, "trigger": trigger, "tags": tags}

    def _node(self, index: int, row: Any, model_ids: set[str]) -> dict[str, Any]:
        where = f"knowledge_pages.json[{index}]"
        if not isinstance(row, dict) or not isinstance(row.get("id"), str) or not row["id"]:
            raise ArchiveInvalid(f"{where} is not a node with an id")
        if row.get("kind") not in NodeKind.values:
            raise ArchiveInvalid(f"{where}.kind must be 'folder' or 'page'")
        if not isinstance(row.get("name"), str) or not row["name"]:
            raise ArchiveInvalid(f"{where}.name must be a non-empty string")
        if row["kind"] == NodeKind.PAGE and row.get("mental_model_id") not in model_ids:
            raise ArchiveInvalid(f"{where} is a page whose mental model "
                                 f"{row.get('mental_model_id')!r} the archive does not carry")
        return row

    def _webhook(self, index: int, row: Any) -> dict[str, Any]:
        where = f"webhooks.json[{index}]"
        if not isinstance(row, dict):
            raise ArchiveInvalid(f"{where} is not an object")
        if not isinstance(row.get("url"), str) or not row["url"]:
            raise ArchiveInvalid(f"{where}.url must be a non-empty string")
        config = row.get("http_config") or {}
        if isinstance(config, str):
            try:
                config = json.loads(config)
            except ValueError:
                config = None
        if not isinstance(config, dict):
            raise ArchiveInvalid(f"{where}.http_config must be an object")
        return {**row, "http_config": config}

    def _directive(self, index: int, row: Any) -> dict[str, Any]:
        where = f"directives.json[{index}]"
        if not isinstance(row, dict):
            raise ArchiveInvalid(f"{where} is not an object")
        for key in ("name", "content"):
            if not isinstance(row.get(key), str) or not row[key]:
                raise ArchiveInvalid(f"{where}.{key} must be a non-empty string")
        if not isinstance(row.get("priority", 0), int):
            raise ArchiveInvalid(f"{where}.priority must be an integer")
        return row

    # -- the memories, in archive order (both the embed and the write pass read them so) -----------

    def memories(self, on_document: Callable[[dict[str, Any], str | None], None] | None = None,
                 ) -> Iterator[tuple[str, dict[str, Any], str | None, uuid.UUID]]:
        """``(kind, item, document_id, new_id)``: every fact, then every observation;
        ``on_document(document, document_id)`` runs before each document's facts (the
        document id None: a synthetic document of facts retained without one)."""
        for document in self.reader.iter_documents():
            doc = document["id"]
            params = document.get("retain_params")
            undocumented = (doc.startswith(UNDOCUMENTED_PREFIX) and isinstance(params, dict)
                            and (params.get("hindsight") or {}).get("undocumented") is True)
            if on_document is not None:
                on_document(document, None if undocumented else doc)
            for ordinal, fact in enumerate(document.get("facts") or []):
                yield "fact", fact, None if undocumented else doc, self.fact_id(doc, ordinal)
        for index, observation in enumerate(self.reader.iter_array(archive.OBSERVATIONS)):
            if not isinstance(observation, dict):
                raise ArchiveInvalid(f"observations.json[{index}] is not an object")
            yield "observation", observation, None, self.observation_id(index)

    # -- 2. embed ------------------------------------------------------------------------------------

    @property
    def writes_memories(self) -> bool:
        return self.request.mode == MERGE or self.plan.restoring.data

    def embed(self, vectors_path: str) -> None:
        if not self.writes_memories:
            return  # a restore without include_data: nothing to embed
        embedder = get_embedder()
        done = 0
        with open(vectors_path, "wb") as out:
            batch: list[str] = []

            def flush() -> None:
                nonlocal done
                if batch:
                    out.write(np.asarray(embedder.embed(batch), dtype=np.float32).tobytes())
                    done += len(batch)
                    batch.clear()
                    self.progress({"phase": "embedding", "memories_embedded": done,
                                   "memories_total": self.plan.facts_total})

            for kind, item, _doc, _new_id in self.memories():
                text = item.get("text")
                if not isinstance(text, str) or not text:
                    raise ArchiveInvalid(f"a {kind} has no text")
                batch.append(text)
                if len(batch) >= _EMBED_BATCH:
                    flush()
            flush()
        self.counts["memories_embedded"] = done

    # -- 3. write ------------------------------------------------------------------------------------

    def write(self, vectors_path: str,
              before_commit: Callable[[dict[str, Any]], None] | None = None) -> dict[str, Any]:
        plan = self.plan
        self.progress({"phase": "writing"})
        with transaction.atomic():
            # The write stamp first: every carried time is capped at it.
            self.stamp = hold_bank_write_lock(plan.target_bank_id)
            if self.request.mode == RESTORE:
                self._create_bank()
            elif not Bank.objects.filter(id=plan.target_bank_id).exists():
                raise ArchiveInvalid(f"bank '{plan.target_bank_id}' no longer exists")
            cited_new: dict[str, str] = {}
            if self.writes_memories:
                cited_new = self._write_memories(vectors_path)
                self._write_invalidated()
            if self.request.mode == RESTORE and plan.restoring.data:
                self._write_models(cited_new)
                self._write_history(cited_new)
                self._write_nodes()
            if self.request.mode == RESTORE and plan.restoring.bank_config:
                self._write_directives()
                self._write_webhooks()
            if self.request.mode == RESTORE and plan.restoring.history:
                self._write_llm_requests()
            if before_commit is not None:
                before_commit(self.result())
        return self.result()

    def result(self) -> dict[str, Any]:
        return {"bank_id": self.plan.target_bank_id, "mode": self.request.mode, **self.counts}

    def _capped(self, value: Any, where: str) -> datetime | None:
        when = _when(value, where)
        return min(when, self.stamp) if when is not None else None

    def _create_bank(self) -> None:
        plan = self.plan
        row = plan.bank_row or {}
        name = row.get("name") if isinstance(row.get("name"), str) else ""
        if name == plan.source_bank_id and plan.target_bank_id != plan.source_bank_id:
            name = plan.target_bank_id  # a default name (the id) follows the bank's new id
        with connection.cursor() as cursor:
            cursor.execute(
                "INSERT INTO banks_bank (id, name, mission, disposition, config) "
                "VALUES (%s, %s, '', '{}'::jsonb, '{}'::jsonb) ON CONFLICT (id) DO NOTHING "
                "RETURNING id", [plan.target_bank_id, name or ""])
            created = cursor.fetchone()
        if created is None:
            raise TargetExists(target_exists_message(plan.target_bank_id))
        bank_config_update(bank_id=plan.target_bank_id, updates=plan.config)
        if row.get("created_at"):
            Bank.objects.filter(id=plan.target_bank_id).update(
                created_at=self._capped(row["created_at"], "banks.json created_at"))

    def _conflicting(self, doc: str) -> bool:
        """The bank holds the document: its row, or a live fact naming it."""
        bank_id = self.plan.target_bank_id
        return Document.objects.filter(bank_id=bank_id, document_id=doc).exists() or \
            MemoryUnit.objects.filter(bank_id=bank_id, document_id=doc).exclude(
                fact_type=FactType.OBSERVATION).exists()

    def _document_row(self, document: dict[str, Any], doc: str) -> Document | None:
        """The ``Document`` row an archive's document writes (docs/behaviour.md#bank-transfer),
        or None for one that carries no text, chunks or row time (only its facts name it).

        Its chunks are the archive's chunk texts in ``chunk_index`` order when they join into
        its ``original_text`` as this server joins them; otherwise the text is one chunk (one
        retain item, what a reprocess retains again)."""
        where = f"document {doc!r}"
        text = document.get("original_text")
        if text is not None and not isinstance(text, str):
            raise ArchiveInvalid(f"{where}: original_text must be a string or null")
        carried = document.get("chunks") or []
        if not isinstance(carried, list) or not all(
                isinstance(c, dict) and isinstance(c.get("chunk_text"), str)
                and isinstance(c.get("chunk_index"), int) for c in carried):
            raise ArchiveInvalid(f"{where}: chunks must be a list of "
                                 "{chunk_index: integer, chunk_text: string}")
        chunks = [c["chunk_text"] for c in sorted(carried, key=lambda c: c["chunk_index"])]
        if text is None and not chunks and document.get("updated_at") is None:
            return None
        if text and Document(chunks=chunks).original_text != text:
            chunks = [text]
        params = document.get("retain_params")
        if params is not None and not isinstance(params, dict):
            raise ArchiveInvalid(f"{where}: retain_params must be an object or null")
        metadata = document.get("metadata")
        if metadata is None and isinstance((params or {}).get("metadata"), dict):
            metadata = (params or {})["metadata"]
        if metadata is not None and not isinstance(metadata, dict):
            raise ArchiveInvalid(f"{where}: metadata must be an object")
        row = Document(bank_id=self.plan.target_bank_id, document_id=doc, chunks=chunks,
                       retain_params=params or {}, tags=_strings(document.get("tags"), where),
                       metadata=metadata or {}, events=[])
        row.content_hash = hashlib.sha256(row.original_text.encode()).hexdigest() if chunks else ""
        if self.request.mode == MERGE:  # a write into a live bank, stamped as one
            row.created_at = row.updated_at = self.stamp
        else:
            row.created_at = self._capped(document.get("created_at"), where) or self.stamp
            row.updated_at = self._capped(document.get("updated_at"), where) or row.created_at
        return row

    def _write_memories(self, vectors_path: str) -> dict[str, str]:
        plan, merge = self.plan, self.request.mode == MERGE
        dimensions = get_embedder().profile.dimensions
        row_bytes = dimensions * 4
        cited_new: dict[str, str] = {}
        written: set[uuid.UUID] | None = set() if merge else None  # a merge's sources may be skipped
        decisions: dict[str, str | None] = {}
        pending: list[list[Any]] = []
        rows: list[Document] = []
        facts = observations = skipped_documents = skipped_observations = document_rows = 0

        def flush_documents() -> None:
            nonlocal document_rows
            try:
                with transaction.atomic():
                    Document.objects.bulk_create(rows)
            except IntegrityError as exc:
                raise ArchiveInvalid(f"two documents share an id ({exc})") from exc
            document_rows += len(rows)
            rows.clear()

        def on_document(document: dict[str, Any], doc: str | None) -> None:
            """The document's row, under the id its facts are written with (a merge decides
            it here, so a document without facts follows document_conflict too)."""
            nonlocal skipped_documents
            if doc is None:
                return
            if merge:
                if doc in decisions:
                    raise ArchiveInvalid(f"document {doc!r} appears twice in the archive")
                decided = decisions[doc] = self._merge_decision(doc)
                if decided is None:
                    skipped_documents += 1
                    return
                doc = decided
            row = self._document_row(document, doc)
            if row is not None:
                rows.append(row)
                if len(rows) >= _DOCUMENT_BATCH:
                    flush_documents()

        def flush() -> None:
            # COPY, in the transaction: a row built by the ORM cost more than its embedding.
            tokens = count_tokens_to_store([row[2] for row in pending])
            with connection.cursor() as cursor, cursor.cursor.copy(_COPY_MEMORIES) as copy:
                for row, count in zip(pending, tokens, strict=True):
                    copy.write_row([*row, count])
            pending.clear()

        with open(vectors_path, "rb") as vectors:
            for kind, item, doc, new_id in self.memories(on_document):
                raw = vectors.read(row_bytes)
                if len(raw) != row_bytes:
                    raise ArchiveInvalid("the archive changed while it was imported")
                where = f"{kind} {item.get('source_id') or new_id}"
                if kind == "fact" and merge and doc is not None:
                    if decisions[doc] is None:  # decided by on_document, before its facts
                        continue
                    doc = decisions[doc]
                sources: list[uuid.UUID] = []
                if kind == "observation":
                    refs = item.get("sources") or []
                    if not isinstance(refs, list) or not refs:
                        skipped_observations += 1
                        continue
                    try:
                        sources = [self.fact_id(ref["document_id"], int(ref["fact_index"]))
                                   for ref in refs]
                    except (KeyError, TypeError, ValueError) as exc:
                        raise ArchiveInvalid(f"{where}: a source is not "
                                             "{document_id, fact_index}") from exc
                    if written is not None and not all(s in written for s in sources):
                        skipped_observations += 1
                        continue
                fact_type = FactType.OBSERVATION if kind == "observation" else item.get("fact_type")
                if fact_type not in FACT_TYPES:
                    raise ArchiveInvalid(f"{where}: fact_type {fact_type!r} is not one of "
                                         f"{', '.join(FACT_TYPES)}")
                created = self._capped(item.get("created_at"), where) if not merge else None
                updated = (self._capped(item.get("updated_at") or item.get("created_at"), where)
                           if not merge else None)
                metadata = item.get("hindsight_metadata") or item.get("metadata") or {}
                pending.append([
                    new_id, plan.target_bank_id, item["text"], item.get("context") or "",
                    fact_type, _strings(item.get("tags"), where), doc,
                    Jsonb(metadata if isinstance(metadata, dict) else {}),
                    _strings(item.get("entities"), where),
                    _when(item.get("occurred_start"), where),
                    _when(item.get("occurred_end"), where),
                    _when(item.get("mentioned_at"), where), sources,
                    _when(item.get("consolidated_at"), where),
                    created or self.stamp, updated or self.stamp,
                    vector_literal(np.frombuffer(raw, dtype=np.float32).tolist()),
                ])
                if written is not None:
                    written.add(new_id)
                source_id = item.get("source_id")
                if isinstance(source_id, str) and source_id in plan.cited:
                    cited_new[source_id] = str(new_id)
                if kind == "fact":
                    facts += 1
                else:
                    observations += 1
                if len(pending) >= _WRITE_BATCH:
                    flush()
            if vectors.read(1):
                raise ArchiveInvalid("the archive changed while it was imported")
        if pending:
            flush()
        if rows:
            flush_documents()
        self.decisions = decisions
        self.counts.update(facts_imported=facts, observations_imported=observations,
                           document_rows_imported=document_rows,
                           documents_skipped=skipped_documents,
                           observations_skipped=skipped_observations,
                           documents_imported=sum(1 for v in decisions.values() if v is not None)
                           if merge else int(plan.manifest.get("document_count") or 0))
        return cited_new

    def _write_invalidated(self) -> None:
        """The curation archive (docs/behaviour.md#invalidated-memories): each invalidated
        memory under a new id, invalidated as it was (a merge writes those of the documents it
        writes, under the document id it writes them with); no vector, as in the archive."""
        merge = self.request.mode == MERGE
        rows: list[InvalidatedMemoryUnit] = []
        for index, item in enumerate(self.reader.iter_array(archive.INVALIDATED_MEMORIES)):
            where = f"invalidated_memory_units.json[{index}]"
            if not isinstance(item, dict) or not isinstance(item.get("text"), str):
                raise ArchiveInvalid(f"{where} is not an object with a text")
            item = _decoded(item, self.plan.serialized)
            doc = item.get("document_id")
            if merge and isinstance(doc, str):
                doc = self.decisions.get(doc, doc)
                if doc is None:
                    continue  # its document was skipped
            fact_type = item.get("fact_type")
            if fact_type not in FACT_TYPES:
                raise ArchiveInvalid(f"{where}: fact_type {fact_type!r} is not one of "
                                     f"{', '.join(FACT_TYPES)}")
            metadata = item.get("metadata")
            created = self._capped(item.get("created_at"), where) or self.stamp
            rows.append(InvalidatedMemoryUnit(
                id=uuid.uuid4(), bank_id=self.plan.target_bank_id, text=item["text"],
                context=_text(item.get("context")), fact_type=fact_type,
                tags=_strings(item.get("tags"), where),
                document_id=doc if isinstance(doc, str) else None,
                metadata=metadata if isinstance(metadata, dict) else {},
                entities=_strings(item.get("entity_names"), where),
                occurred_start=_when(item.get("occurred_start"), where),
                occurred_end=_when(item.get("occurred_end"), where),
                mentioned_at=_when(item.get("mentioned_at"), where),
                consolidated_at=_when(item.get("consolidated_at"), where),
                edited_at=self._capped(item.get("edited_at"), where),
                created_at=created,
                updated_at=self._capped(item.get("updated_at"), where) or created,
                invalidation_reason=_text(item.get("invalidation_reason")) or None,
                invalidated_at=self._capped(item.get("invalidated_at"), where) or self.stamp,
            ))
        InvalidatedMemoryUnit.objects.bulk_create(rows, batch_size=_WRITE_BATCH)
        self.counts["invalidated_memories_imported"] = len(rows)

    def _merge_decision(self, doc: str) -> str | None:
        """The document id a merge writes ``doc``'s facts under, or None to skip them."""
        if not self._conflicting(doc):
            return doc
        rule = self.request.document_conflict
        if rule == "skip":
            return None
        if rule == "replace":
            MemoryUnit.objects.filter(bank_id=self.plan.target_bank_id, document_id=doc).exclude(
                fact_type=FactType.OBSERVATION).delete()
            Document.objects.filter(bank_id=self.plan.target_bank_id, document_id=doc).delete()
            return doc
        return str(uuid.uuid4())

    def _write_models(self, cited_new: dict[str, str]) -> None:
        plan = self.plan
        units = []
        for row in plan.models:
            where = f"mental model {row['id']}"
            ours: dict[str, Any] = row["hindsight"] if isinstance(row.get("hindsight"), dict) else {}
            refreshed = ours.get("last_refreshed_at", row.get("last_refreshed_at")) if ours else \
                row.get("last_refreshed_at")
            units.append(MentalModel(
                bank_id=plan.target_bank_id, mental_model_id=row["id"], name=row["name"],
                source_query=row["source_query"], content=row.get("content") or "",
                document=ours.get("document"), tags=row["tags"],
                max_tokens=row.get("max_tokens") or 2048, trigger=row["trigger"],
                last_refreshed_at=self._capped(refreshed, where),
                last_memory_seen_at=self._capped(row.get("last_memory_seen_at"), where),
                last_refresh_failed_at=self._capped(row.get("last_refresh_failed_at"), where),
                last_refresh_failure_transient=bool(ours.get("last_refresh_failure_transient")),
                refresh_failure_streak=int(ours.get("refresh_failure_streak") or 0),
                auto_refresh_not_before=_when(ours.get("auto_refresh_not_before"), where),
                last_full_refreshed_at=self._capped(row.get("last_full_refreshed_at"), where),
                awaiting_llm_since=self._capped(ours.get("awaiting_llm_since"), where),
                cron_checked_at=self._capped(ours.get("cron_checked_at"), where),
                last_refresh_source_query=row.get("last_refreshed_source_query"),
                created_at=self._capped(row.get("created_at"), where) or self.stamp,
                updated_at=self._capped(ours.get("updated_at"), where) or self.stamp,
                reflect_response=_remap(row.get("reflect_response"), cited_new),
            ))
        MentalModel.objects.bulk_create(units, batch_size=_WRITE_BATCH)
        pages = {n["mental_model_id"] for n in plan.nodes if n["kind"] == NodeKind.PAGE}
        self.counts["mental_models_imported"] = sum(1 for m in plan.models if m["id"] not in pages)

    def _write_history(self, cited_new: dict[str, str]) -> None:
        plan = self.plan
        uids = dict(MentalModel.objects.filter(bank_id=plan.target_bank_id)
                    .values_list("mental_model_id", "uid"))
        pending: list[MentalModelHistory] = []
        count = 0
        for index, row in enumerate(self.reader.iter_array(archive.MENTAL_MODEL_HISTORY)):
            where = f"mental_model_history.json[{index}]"
            if not isinstance(row, dict) or row.get("mental_model_id") not in uids:
                raise ArchiveInvalid(f"{where} belongs to no mental model of the archive")
            row = _decoded(row, plan.serialized)
            content: dict[str, Any] = row["content"] if isinstance(row.get("content"), dict) else {}
            failure = content.get("kind") == HistoryKind.FAILURE
            operation_id = content.get("operation_id")
            pending.append(MentalModelHistory(
                model_id=uids[row["mental_model_id"]],
                kind=HistoryKind.FAILURE if failure else HistoryKind.VERSION,
                changed_at=self._capped(row.get("changed_at"), where) or self.stamp,
                previous_content=None if failure else content.get("previous_content"),
                previous_reflect_response=None if failure else _remap(
                    content.get("previous_reflect_response"), cited_new),
                outcome=content.get("outcome") if failure else None,
                reason=content.get("failure_reason") if failure else None,
                exception=content.get("error_message") if failure else None,
                operation_id=operation_id if failure and _UUID.fullmatch(str(operation_id or ""))
                else None,
            ))
            count += 1
            if len(pending) >= _WRITE_BATCH:
                MentalModelHistory.objects.bulk_create(pending)
                pending.clear()
        MentalModelHistory.objects.bulk_create(pending)
        self.counts["mental_model_history_imported"] = count

    def _write_nodes(self) -> None:
        plan = self.plan
        ids = [n["id"] for n in plan.nodes]
        taken = set(KnowledgeNode.objects.filter(id__in=ids).values_list("id", flat=True))
        new_ids = {i: (f"{i[:2]}-{uuid.uuid4().hex}" if i in taken else i) for i in ids}
        uids = dict(MentalModel.objects.filter(bank_id=plan.target_bank_id)
                    .values_list("mental_model_id", "uid"))
        for node in plan.nodes:
            where = f"knowledge node {node['id']} ({node['name']!r})"
            parent = node.get("parent_id")
            page = node["kind"] == NodeKind.PAGE
            try:
                with transaction.atomic():
                    KnowledgeNode.objects.create(
                        id=new_ids[node["id"]], bank_id=plan.target_bank_id,
                        parent_id=new_ids[parent] if parent else None,
                        kind=node["kind"], name=node["name"],
                        mental_model_id=uids[node["mental_model_id"]] if page else None,
                        created_at=self._capped(node.get("created_at"), where) or self.stamp,
                        updated_at=self._capped(node.get("updated_at"), where) or self.stamp,
                    )
            except IntegrityError as exc:
                raise ArchiveInvalid(f"{where} cannot be placed in the tree ({exc})") from exc
        self.counts["knowledge_pages_imported"] = len(plan.nodes)

    def _write_directives(self) -> None:
        plan = self.plan
        id_of = _ids_kept(Directive, plan.directives)
        units = []
        for row in plan.directives:
            where = f"directive {row.get('name')!r}"
            units.append(Directive(
                id=id_of(row),
                bank_id=plan.target_bank_id, name=row["name"], content=row["content"],
                priority=int(row.get("priority") or 0), is_active=bool(row.get("is_active", True)),
                tags=_strings(row.get("tags"), where),
                created_at=self._capped(row.get("created_at"), where) or self.stamp,
                updated_at=self._capped(row.get("updated_at"), where) or self.stamp,
            ))
        Directive.objects.bulk_create(units)
        stamps = []
        for index, row in enumerate(self.reader.iter_array(archive.DIRECTIVE_STAMPS)):
            where = f"{archive.DIRECTIVE_STAMPS}[{index}]"
            if not isinstance(row, dict):
                raise ArchiveInvalid(f"{where} is not an object")
            stamps.append(DirectiveScopeStamp(
                bank_id=plan.target_bank_id, tags=sorted(set(_strings(row.get("tags"), where))),
                changed_at=self._capped(row.get("changed_at"), where) or self.stamp))
        DirectiveScopeStamp.objects.bulk_create(stamps, ignore_conflicts=True)
        self.counts["directives_imported"] = len(units)

    def _write_webhooks(self) -> None:
        """A bank's webhooks come back as they were: the URL, the secret, the events, enabled
        or not (the SSRF guard still checks every delivery)."""
        plan = self.plan
        id_of = _ids_kept(Webhook, plan.webhooks)
        units = []
        for row in plan.webhooks:
            where = f"webhook {row.get('url')!r}"
            units.append(Webhook(
                id=id_of(row),
                bank_id=plan.target_bank_id, url=row["url"], secret=row.get("secret") or None,
                event_types=_strings(row.get("event_types"), where),
                enabled=bool(row.get("enabled", True)), http_config=row["http_config"],
                created_at=self._capped(row.get("created_at"), where) or self.stamp,
                updated_at=self._capped(row.get("updated_at"), where) or self.stamp,
            ))
        Webhook.objects.bulk_create(units)
        self.counts["webhooks_imported"] = len(units)

    def _write_llm_requests(self) -> None:
        plan = self.plan
        pending: list[LLMRequest] = []
        count = 0
        for index, row in enumerate(self.reader.iter_array(archive.LLM_REQUESTS)):
            where = f"{archive.LLM_REQUESTS}[{index}]"
            if not isinstance(row, dict):
                raise ArchiveInvalid(f"{where} is not an object")
            row = _decoded(row, plan.serialized)
            ours = row["hindsight"] if isinstance(row.get("hindsight"), dict) else {}
            operation_id = ours.get("operation_id")
            pending.append(LLMRequest(
                bank_id=plan.target_bank_id, operation=row.get("operation"),
                operation_id=operation_id if _UUID.fullmatch(str(operation_id or "")) else None,
                scope=str(row.get("scope") or ""), kind=str(ours.get("kind") or "chat"),
                provider=str(row.get("provider") or ""), model=str(row.get("model") or ""),
                status=str(row.get("status") or "success"),
                attempt=int(ours.get("attempt") or 1),
                started_at=_when(row.get("started_at"), where) or self.stamp,
                ended_at=_when(row.get("ended_at"), where) or self.stamp,
                duration_ms=int(row.get("duration_ms") or 0),
                input_tokens=int(row.get("input_tokens") or 0),
                output_tokens=int(row.get("output_tokens") or 0),
                prompt=_text(row.get("input")), response=_text(row.get("output")),
                truncated=bool(ours.get("truncated")), error=row.get("error"),
            ))
            count += 1
            if len(pending) >= _WRITE_BATCH:
                LLMRequest.objects.bulk_create(pending)
                pending.clear()
        LLMRequest.objects.bulk_create(pending)
        self.counts["llm_requests_imported"] = count


def _strings(value: Any, where: str) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ArchiveInvalid(f"{where}: expected a list of strings, got {value!r}")
    return value


def _text(value: Any) -> str:
    if value is None:
        return ""
    return value if isinstance(value, str) else archive.dumps(value).decode()


def _cited_ids(reflect_response: Any) -> set[str]:
    based_on = reflect_response.get("based_on") if isinstance(reflect_response, dict) else None
    if not isinstance(based_on, dict):
        return set()
    return {entry["id"] for entries in based_on.values() if isinstance(entries, list)
            for entry in entries if isinstance(entry, dict) and isinstance(entry.get("id"), str)}


def _remap(reflect_response: Any, cited_new: dict[str, str]) -> Any:
    """A reflect response whose evidence names the memories' new ids (the text kept as is)."""
    if not isinstance(reflect_response, dict) or not isinstance(reflect_response.get("based_on"), dict):
        return reflect_response
    based_on = {
        bucket: [({**e, "id": cited_new.get(str(e.get("id")), e.get("id"))} if isinstance(e, dict) else e)
                 for e in entries] if isinstance(entries, list) else entries
        for bucket, entries in reflect_response["based_on"].items()
    }
    return {**reflect_response, "based_on": based_on}


def _parents_first(nodes: list[dict[str, Any]]) -> list[dict[str, Any]]:
    by_id = {n["id"]: n for n in nodes}
    ordered: list[dict[str, Any]] = []
    placed: set[str] = set()
    remaining = nodes
    while remaining:
        ready = [n for n in remaining if not n.get("parent_id") or n["parent_id"] in placed]
        if not ready:
            missing = remaining[0]
            problem = ("whose parent the archive does not carry"
                       if missing.get("parent_id") not in by_id else "in a cycle")
            raise ArchiveInvalid(f"knowledge node {missing['id']!r} is {problem}")
        ordered.extend(ready)
        placed |= {n["id"] for n in ready}
        remaining = [n for n in remaining if n["id"] not in placed]
    return ordered


def bank_import(*, path: str, request: ImportRequest, progress: Progress | None = None,
                before_commit: Callable[[dict[str, Any]], None] | None = None,
                ) -> dict[str, Any]:
    """Import the archive at ``path`` (a local file); the counts of what was written.
    ``before_commit(counts)`` runs last inside the writing transaction (an operation's fenced
    completion: the bank and the operation's end commit together).

    Raises ``ArchiveInvalid`` (the archive, naming the problem), ``TargetExists`` (a restore
    onto an existing bank), ``EmbeddingError`` (the embedder; worth another attempt)."""
    with archive_open(path, mode=request.mode) as reader:
        job = _Import(reader, request, progress)
        job.check()
        fd, vectors_path = tempfile.mkstemp(prefix="hindsight-import-", suffix=".f32")
        os.close(fd)
        try:
            job.embed(vectors_path)
            return job.write(vectors_path, before_commit)
        finally:
            os.unlink(vectors_path)


def _ids_kept(model: Any, rows: list[dict[str, Any]]) -> Callable[[dict[str, Any]], uuid.UUID]:
    """Each row's id: the archive's when it is a UUID no row of ``model`` holds yet (one query
    for them all), else a new one."""
    ids = [str(r.get("id")) for r in rows if _UUID.fullmatch(str(r.get("id") or ""))]
    taken = {str(i) for i in model.objects.filter(id__in=ids).values_list("id", flat=True)}

    def id_of(row: dict[str, Any]) -> uuid.UUID:
        raw = str(row.get("id") or "")
        return uuid.UUID(raw) if _UUID.fullmatch(raw) and raw not in taken else uuid.uuid4()

    return id_of
