"""The bank archive: upstream Hindsight 1.1.0's whole-bank transfer ZIP (schema version 1), read
safely and written entry by entry (docs/behaviour.md#bank-transfer).

Entries, as upstream names them (its importer reads these and no others):

- ``manifest.json`` — the descriptor (``archive_type: "bank"``, counts, the scope it carries);
- ``documents/NNNNNN.json`` — one document each: its row (text and chunks, tags, retain
  parameters, times) and its facts (text, type, tags, dates, metadata, entities, the source id
  mental-model evidence cites, consolidation state), never a vector;
- ``observations.json`` — consolidated observations, each naming its sources as
  ``(document_id, fact_index)`` pairs of the facts above;
- ``banks.json``, ``directives.json``, ``webhooks.json`` — the bank's row (its config
  overrides) and its rules, with ``include_bank_config``;
- ``mental_models.json``, ``mental_model_history.json``, ``knowledge_pages.json`` — what the
  bank wrote from its memories, as rows under upstream's column names;
- ``data/*.json`` — upstream's operational rows (always empty arrays from here);
- ``history/llm_requests.json``, ``history/audit_log.json`` — with ``include_history``.

What this server adds rides where upstream does not look, so its importer ignores it: keys of
its own on a fact or a row (a fact's ``updated_at``, a document's ``metadata``, a model's
retry state), and entries under
``hindsight/``. Row files are written ``decoded`` (JSON values as JSON).

Reading refuses, naming the problem: a file that is not a ZIP or is cut short, an entry whose
name climbs out (``..``, an absolute or drive path, a backslash), a manifest that is missing,
not a bank archive or of a newer schema, and an archive that unpacks to more than
``HINDSIGHT_API_TRANSFER_MAX_UNPACKED_BYTES`` — counted on the bytes actually inflated, not on
what the headers claim. A JSON array entry is decoded one item at a time.
"""

from __future__ import annotations

import io
import json
import re
import uuid
import zipfile
import zlib
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from datetime import date, datetime
from decimal import Decimal
from pathlib import PurePosixPath
from typing import IO, Any

from hindsight.infra.errors import BadRequest
from hindsight.infra.vocabulary import iso

SCHEMA_VERSION = 1
ARCHIVE_TYPE = "bank"
MANIFEST = "manifest.json"
DOCUMENTS_PREFIX = "documents/"
OBSERVATIONS = "observations.json"
BANKS = "banks.json"
DIRECTIVES = "directives.json"
WEBHOOKS = "webhooks.json"
MENTAL_MODELS = "mental_models.json"
MENTAL_MODEL_HISTORY = "mental_model_history.json"
KNOWLEDGE_PAGES = "knowledge_pages.json"
LLM_REQUESTS = "history/llm_requests.json"
AUDIT_LOG = "history/audit_log.json"
# Upstream's operational tables: this server has none of them, and writes each as [].
DATA_ENTRIES = ("data/async_operations.json", "data/graph_maintenance_queue.json",
                "data/entity_maintenance_queue.json")
# The curation archive: the bank's invalidated memories (docs/behaviour.md#invalidated-memories).
INVALIDATED_MEMORIES = "data/invalidated_memory_units.json"
# This server's own entries (upstream ignores them): when each directive tag set last changed.
DIRECTIVE_STAMPS = "hindsight/directive_stamps.json"
PRODUCER = "hindsight-mental-models"

_DRIVE = re.compile(r"^[A-Za-z]:")
_READ_CHARS = 1 << 16


class ArchiveInvalid(BadRequest):
    """The archive cannot be read as a bank archive; the message names why."""

    def __init__(self, problem: str):
        super().__init__(f"Invalid bank archive: {problem}")
        self.problem = problem


def json_default(value: Any) -> Any:
    if isinstance(value, datetime):
        return iso(value)
    if isinstance(value, date):
        return str(value)  # a calendar day: YYYY-MM-DD
    if isinstance(value, uuid.UUID | Decimal):
        return str(value)
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


def dumps(value: Any) -> bytes:
    return json.dumps(value, default=json_default, ensure_ascii=False).encode("utf-8")


def unsafe_entry_problem(name: str) -> str | None:
    """Why ``name`` may not be an entry (it would point outside the archive), or None."""
    if name.startswith("/") or "\\" in name or _DRIVE.match(name):
        return f"entry {name!r} has an absolute path"
    if ".." in PurePosixPath(name).parts:
        return f"entry {name!r} climbs out of the archive with '..'"
    return None


# --- reading --------------------------------------------------------------------------------------


class _Budget:
    """The bytes the whole archive may still inflate to, shared by every entry read."""

    def __init__(self, limit: int):
        self.limit = limit
        self.left = limit

    def spend(self, count: int) -> None:
        self.left -= count
        if self.left < 0:
            raise ArchiveInvalid(
                f"it unpacks to more than {self.limit} bytes "
                "(HINDSIGHT_API_TRANSFER_MAX_UNPACKED_BYTES)")


class _CountedEntry(io.RawIOBase):
    """An entry's inflated bytes, each one counted against the archive's budget as it is read,
    and a corrupt or cut-short entry turned into ``ArchiveInvalid``."""

    def __init__(self, raw: IO[bytes], name: str, budget: _Budget):
        self._raw, self._name, self._budget = raw, name, budget

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        try:
            data = self._raw.read(len(buffer))
        except (zipfile.BadZipFile, zlib.error, EOFError, OSError) as exc:
            raise ArchiveInvalid(f"entry {self._name!r} is corrupt or cut short ({exc})") from exc
        self._budget.spend(len(data))
        buffer[: len(data)] = data
        return len(data)

    def close(self) -> None:
        self._raw.close()
        super().close()


class ArchiveReader:
    """An archive opened for reading: entry names checked, the manifest read and checked."""

    def __init__(self, path: str, *, max_unpacked: int, require_bank: bool = True):
        try:
            self._zip = zipfile.ZipFile(path)
        except (zipfile.BadZipFile, zlib.error, EOFError, OSError, ValueError) as exc:
            raise ArchiveInvalid(f"the file is not a readable ZIP archive ({exc})") from exc
        try:
            self.names = set()
            declared = 0
            for info in self._zip.infolist():
                problem = unsafe_entry_problem(info.filename)
                if problem:
                    raise ArchiveInvalid(problem)
                self.names.add(info.filename)
                declared += info.file_size
            self._budget = _Budget(max_unpacked)
            # What the headers claim is checked first (a cheap early no); what is inflated is
            # counted as it is read, since headers can lie.
            self._budget.spend(declared)
            self._budget.left = max_unpacked
            self.manifest = self._manifest(require_bank=require_bank)
        except BaseException:
            self._zip.close()
            raise

    def close(self) -> None:
        self._zip.close()

    def __enter__(self) -> ArchiveReader:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def _manifest(self, *, require_bank: bool) -> dict[str, Any]:
        if MANIFEST not in self.names:
            raise ArchiveInvalid(
                "manifest.json is missing: this is not an archive written by a bank export")
        manifest = self.read_json(MANIFEST)
        if not isinstance(manifest, dict):
            raise ArchiveInvalid("manifest.json is not a JSON object")
        version = manifest.get("schema_version", SCHEMA_VERSION)
        if not isinstance(version, int) or isinstance(version, bool):
            raise ArchiveInvalid("manifest.json's schema_version is not an integer")
        if version > SCHEMA_VERSION:
            raise ArchiveInvalid(
                f"schema version {version} is newer than this server reads ({SCHEMA_VERSION})")
        if version != SCHEMA_VERSION:
            raise ArchiveInvalid(
                f"schema version {version} is not supported (this server reads {SCHEMA_VERSION})")
        if not isinstance(manifest.get("source_bank_id"), str) or not manifest["source_bank_id"]:
            raise ArchiveInvalid("manifest.json names no source_bank_id")
        if require_bank and manifest.get("archive_type", "documents") != ARCHIVE_TYPE:
            raise ArchiveInvalid(
                f"archive_type is {manifest.get('archive_type', 'documents')!r}, not 'bank': a "
                "restore takes a whole-bank export")
        return manifest

    @contextmanager
    def open(self, name: str) -> Iterator[IO[bytes]]:
        try:
            raw = self._zip.open(name)
        except (zipfile.BadZipFile, zlib.error, EOFError, OSError) as exc:
            raise ArchiveInvalid(f"entry {name!r} is corrupt or cut short ({exc})") from exc
        with io.BufferedReader(_CountedEntry(raw, name, self._budget), 1 << 16) as entry:
            yield entry

    def read_json(self, name: str, default: Any = None) -> Any:
        """A small entry whole (the manifest, the bank row), or ``default`` when absent."""
        if name not in self.names:
            return default
        with self.open(name) as entry:
            data = entry.read()
        try:
            return json.loads(data)
        except ValueError as exc:
            raise ArchiveInvalid(f"entry {name!r} is not valid JSON ({exc})") from exc

    def iter_array(self, name: str) -> Iterator[Any]:
        """The items of a JSON array entry, one decoded at a time ([] when absent)."""
        if name not in self.names:
            return
        with self.open(name) as raw, io.TextIOWrapper(raw, encoding="utf-8") as text:
            yield from _array_items(text, name)

    def document_names(self) -> list[str]:
        return sorted(n for n in self.names
                      if n.startswith(DOCUMENTS_PREFIX) and n.endswith(".json"))

    def iter_documents(self) -> Iterator[dict[str, Any]]:
        """The documents in entry order, one parsed at a time."""
        for name in self.document_names():
            document = self.read_json(name)
            if not isinstance(document, dict) or not isinstance(document.get("id"), str):
                raise ArchiveInvalid(f"entry {name!r} is not a document (an object with an id)")
            facts = document.get("facts") or []
            if not isinstance(facts, list) or not all(isinstance(f, dict) for f in facts):
                raise ArchiveInvalid(f"entry {name!r}'s facts are not a list of objects")
            yield document


def _array_items(text: IO[str], name: str) -> Iterator[Any]:
    """Decode ``[item, item, …]`` from ``text`` item by item: the buffer holds one item and a
    read-ahead, never the whole array."""
    decoder = json.JSONDecoder()
    buffer, position, finished_reading = "", 0, False
    opened, expect_item = False, True

    def fill() -> bool:
        nonlocal buffer, position, finished_reading
        chunk = text.read(max(_READ_CHARS, len(buffer) - position))
        buffer, position = buffer[position:] + chunk, 0
        finished_reading = not chunk
        return bool(chunk)

    while True:
        while position < len(buffer) and buffer[position].isspace():
            position += 1
        if position >= len(buffer):
            if finished_reading or not fill():
                raise ArchiveInvalid(f"entry {name!r} is not a complete JSON array")
            continue
        char = buffer[position]
        if not opened:
            if char != "[":
                raise ArchiveInvalid(f"entry {name!r} is not a JSON array")
            opened, position = True, position + 1
            continue
        if char == "]":
            return
        if not expect_item:
            if char != ",":
                raise ArchiveInvalid(f"entry {name!r} is not a valid JSON array")
            expect_item, position = True, position + 1
            continue
        try:
            item, end = decoder.raw_decode(buffer, position)
        except ValueError:
            end = -1
        # An item that reaches the buffer's end may continue past it (a number cut in two).
        if end == -1 or (end == len(buffer) and not finished_reading):
            if finished_reading or not fill():
                raise ArchiveInvalid(f"entry {name!r} is not a complete JSON array")
            continue
        yield item
        position, expect_item = end, False


# --- writing --------------------------------------------------------------------------------------


class ArchiveWriter:
    """A ZIP written to a seekable file one entry at a time, each entry streamed."""

    def __init__(self, fileobj: IO[bytes]):
        self._zip = zipfile.ZipFile(fileobj, "w", compression=zipfile.ZIP_DEFLATED,
                                    compresslevel=6, allowZip64=True)

    def close(self) -> None:
        self._zip.close()

    @contextmanager
    def entry(self, name: str) -> Iterator[IO[bytes]]:
        # force_zip64: an entry's size is not known before it is written.
        with self._zip.open(name, "w", force_zip64=True) as raw, \
                io.BufferedWriter(raw, 1 << 16) as out:
            yield out

    def write_json(self, name: str, value: Any) -> None:
        with self.entry(name) as out:
            out.write(dumps(value))

    def write_array(self, name: str, items: Iterable[Any]) -> int:
        """A JSON array entry written item by item; returns how many."""
        count = 0
        with self.entry(name) as out:
            out.write(b"[")
            for item in items:
                if count:
                    out.write(b",")
                out.write(dumps(item))
                count += 1
            out.write(b"]")
        return count
