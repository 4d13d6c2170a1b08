"""``manage.py reembed``: rebuild every memory vector with the configured embedding profile.

Run it (with the web and worker processes stopped) after changing
``HINDSIGHT_API_EMBEDDINGS_*``; until it has run, start-up refuses the new profile
(system check ``hindsight.E100``).

What it does:
1. Loads the configured embedder and embeds a probe text, so an unreachable provider or a wrong
   dimension fails before anything is touched.
2. If the dimension changed: in one transaction, drops the HNSW index ``memory_embedding_hnsw``,
   converts ``banks_memoryunit.embedding`` and ``mentalmodels_mentalmodel.embedding`` to the new
   ``vector(N)`` (old vectors become NULL: they are not comparable anyway).
3. Re-embeds every memory's text in batches (embedding outside transactions, one short
   transaction per batch). ``updated_at`` is not touched: the content did not change, so no
   mental model becomes stale because of a re-embedding.
4. Recreates the HNSW index if it was dropped (building it once after loading is faster than
   maintaining it during the load).
5. Clears mental-model embeddings; reflect re-embeds them lazily (seed 004).
6. Records the new profile. Interrupted? Run it again: it starts over and ends in the same state.
"""

from __future__ import annotations

import time
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import connection, transaction

from hindsight.banks.models import MemoryUnit
from hindsight.infra.db import vector_literal
from hindsight.infra.embeddings import EmbeddingError, configured_profile, get_embedder
from hindsight.infra.embeddings.profile import column_dimensions, profile_record, profile_recorded

HNSW_INDEX_NAME = "memory_embedding_hnsw"
VECTOR_COLUMNS = (
    ("banks_memoryunit", "embedding"),
    ("mentalmodels_mentalmodel", "embedding"),
)


class Command(BaseCommand):
    help = "Re-embed every memory with the configured embedding profile and record the profile."
    # The profile check would refuse exactly the state this command repairs.
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--batch-size", type=int, default=64, help="texts per embed call")

    def handle(self, *args: Any, **options: Any) -> None:
        batch_size = int(options["batch_size"])
        if batch_size < 1:
            raise CommandError("--batch-size must be >= 1")
        started = time.monotonic()
        profile = configured_profile()
        before = profile_recorded()
        try:
            embedder = get_embedder()
            probe = embedder.embed(["reembed probe"])[0]
        except EmbeddingError as exc:
            raise CommandError(f"the configured embedder does not work: {exc}") from exc
        if len(probe) != profile.dimensions:
            raise CommandError(
                f"the embedder returned {len(probe)} dimensions, the profile says "
                f"{profile.dimensions}"
            )

        declared = column_dimensions("banks_memoryunit", "embedding")
        converted = declared is not None and declared != profile.dimensions
        if converted:
            self._convert_columns(profile.dimensions)

        total = 0
        last_id = None
        while True:
            rows = MemoryUnit.objects.order_by("id")
            if last_id is not None:
                rows = rows.filter(id__gt=last_id)
            batch = list(rows.values_list("id", "text")[:batch_size])
            if not batch:
                break
            try:
                vectors = embedder.embed([text for _, text in batch])
            except EmbeddingError as exc:
                raise CommandError(
                    f"embedding failed after {total} memories (run reembed again): {exc}"
                ) from exc
            _store_vectors([memory_id for memory_id, _ in batch], vectors)
            total += len(batch)
            last_id = batch[-1][0]
            if options["verbosity"] >= 2:
                self.stdout.write(f"  {total} memories re-embedded")

        if converted:
            self._create_hnsw_index()
        self._clear_mental_model_embeddings()
        profile_record(profile=profile)

        was = before.describe() if before else "no recorded profile"
        column = f"; column converted from vector({declared})" if converted else ""
        self.stdout.write(
            self.style.SUCCESS(
                f"Re-embedded {total} memories with {profile.describe()} "
                f"(was {was}){column} in {time.monotonic() - started:.1f}s"
            )
        )

    def _convert_columns(self, dimensions: int) -> None:
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(f'DROP INDEX IF EXISTS "{HNSW_INDEX_NAME}"')
            for table, column in VECTOR_COLUMNS:
                if not _table_exists(table):
                    continue
                cursor.execute(
                    f'ALTER TABLE "{table}" ALTER COLUMN "{column}" '
                    f"TYPE vector({int(dimensions)}) USING NULL"
                )

    def _create_hnsw_index(self) -> None:
        index = next(i for i in MemoryUnit._meta.indexes if i.name == HNSW_INDEX_NAME)
        with connection.schema_editor() as editor:
            editor.add_index(MemoryUnit, index)

    def _clear_mental_model_embeddings(self) -> None:
        if not _table_exists("mentalmodels_mentalmodel"):
            return
        with connection.cursor() as cursor:
            cursor.execute(
                "UPDATE mentalmodels_mentalmodel SET embedding = NULL, embedding_model = '', "
                "embedding_dimensions = NULL, embedding_content_hash = '' "
                "WHERE embedding IS NOT NULL OR embedding_content_hash <> ''"
            )


def _store_vectors(ids: list[Any], vectors: list[list[float]]) -> None:
    # Plain ``::vector`` rather than the model field's ``vector(N)`` cast: the column may have
    # just been converted to a dimension this process's model class was not imported with.
    literals = [vector_literal(vector) for vector in vectors]
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(
            "UPDATE banks_memoryunit AS m SET embedding = v.e::vector "
            "FROM unnest(%s::uuid[], %s::text[]) AS v(id, e) WHERE m.id = v.id",
            [ids, literals],
        )


def _table_exists(table: str) -> bool:
    with connection.cursor() as cursor:
        cursor.execute("SELECT to_regclass(%s) IS NOT NULL", [table])
        return bool(cursor.fetchone()[0])
