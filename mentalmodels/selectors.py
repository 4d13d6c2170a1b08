"""Reads of mental models: one model, a bank's page of models, a model's history.

The list order is ``last_refreshed_at DESC, id DESC`` with PostgreSQL's default placement of
nulls for ``DESC`` (first): a model no refresh has completed yet sits at the top, next to the
most recently refreshed ones, which is where a user who just created it looks for it.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime
from typing import Any, NamedTuple

from django.db import connection
from django.db.models import BooleanField, Count, ExpressionWrapper, F, Q, QuerySet, Window
from psycopg.types.datetime import TimestamptzLoader
from psycopg.types.string import TextLoader

from hindsight.banks.models import Bank
from hindsight.banks.selectors import bank_last_memory_write_subquery
from hindsight.infra.errors import NotFound
from mentalmodels.document.diff import PageVersion, page_diff
from mentalmodels.models import HistoryKind, MentalModel, MentalModelHistory
from mentalmodels.services import refresh_dedupe_key


class ListedModel(NamedTuple):
    """One list item as read: the columns its detail level renders and staleness reads (tags,
    trigger, watermark), under the model's attribute names, so the one render and the one
    staleness rule take it as they take a model. Never the embedding or the structured
    document; the content and reflect response only when the detail level shows them (``None``
    otherwise, and not rendered then)."""

    uid: int
    bank_id: str
    mental_model_id: str
    name: str
    tags: list[str]
    trigger: dict[str, Any]
    last_refreshed_at: datetime | None
    last_memory_seen_at: datetime | None
    last_refresh_failed_at: datetime | None
    last_full_refreshed_at: datetime | None
    created_at: datetime | None
    source_query: str | None = None
    content: str | None = None
    max_tokens: int | None = None
    reflect_response: dict[str, Any] | None = None
    #: Read at every detail level (a join on the page's one-to-one, ``mentalmodels.knowledge``).
    is_knowledge_page: bool = False


# The columns read at each detail level: a prefix of ``ListedModel``'s fields, the rest None.
LIST_FIELDS_BY_DETAIL = {
    "metadata": ListedModel._fields[:11],
    "content": ListedModel._fields[:14],
    "full": ListedModel._fields[:15],
}
_TRIGGER = ListedModel._fields.index("trigger")
_REFLECT_RESPONSE = ListedModel._fields.index("reflect_response")
_IS_PAGE = ListedModel._fields.index("is_knowledge_page")


def mental_model_get(*, bank_id: str, mental_model_id: str) -> MentalModel:
    try:
        return MentalModel.objects.get(bank_id=bank_id, mental_model_id=mental_model_id)
    except MentalModel.DoesNotExist:
        raise NotFound(f"Mental model '{mental_model_id}' not found") from None


def mental_model_exists(*, bank_id: str, mental_model_id: str) -> bool:
    return MentalModel.objects.filter(bank_id=bank_id, mental_model_id=mental_model_id).exists()


def _tags_filter(qs: QuerySet[MentalModel], tags: Sequence[str], tags_match: str) -> QuerySet[MentalModel]:
    """Upstream's list semantics: the requested tags against the model's own tag array."""
    tags = list(dict.fromkeys(tags))
    if not tags:
        return qs
    if tags_match == "all":
        return qs.filter(tags__contains=tags)
    if tags_match == "exact":
        return qs.filter(tags__contains=tags, tags__contained_by=tags)
    return qs.filter(tags__overlap=tags)


class ListedPage(NamedTuple):
    items: list[ListedModel]
    #: Every model matching the filter, on this page or not.
    total: int
    #: The bank's last memory write (``bank_last_memory_write_at``) read with the page, for the
    #: staleness shortcut; ``None`` for an empty page or a bank without memories.
    last_memory_write_at: datetime | None


def mental_models_list(
    *,
    bank_id: str,
    tags: Sequence[str] = (),
    tags_match: str = "any",
    limit: int = 100,
    offset: int = 0,
    detail: str = "full",
    exclude_knowledge_pages: bool = False,
) -> ListedPage:
    """One page of a bank's models, the total matching the filter and the bank's last memory
    write, in one query (the total a window count over the filtered rows, the last write an
    uncorrelated subquery run once); the columns ``detail`` renders, and no others.

    The ORM builds the statement and a cursor with psycopg's own loaders runs it: Django's
    timestamptz loader is pure Python, and a page of 1,000 spent more time in it and in
    building model instances than anywhere else.

    A page with items proves the bank exists; only an empty one costs the existence check (and,
    past the end, a count).
    """
    qs = _tags_filter(MentalModel.objects.filter(bank_id=bank_id), tags, tags_match)
    if exclude_knowledge_pages:
        qs = qs.filter(knowledge_node__isnull=True)
    columns = LIST_FIELDS_BY_DETAIL[detail]
    query = (
        qs.annotate(listed_total=Window(Count("uid")),
                    listed_page=ExpressionWrapper(Q(knowledge_node__isnull=False),
                                                  output_field=BooleanField()),
                    listed_write=bank_last_memory_write_subquery(bank_id=bank_id))
        .order_by(F("last_refreshed_at").desc(nulls_first=True), F("mental_model_id").desc())
        .values_list(*columns, "listed_page", "listed_total", "listed_write")
        [offset : offset + limit]
    ).query
    sql, params = query.sql_with_params()
    with connection.cursor() as cursor:
        # The instants Django's loader gives (aware, in the connection's UTC), loaded in C;
        # JSON as text, as Django reads it, parsed below.
        adapters = cursor.cursor.adapters
        adapters.register_loader("timestamptz", TimestamptzLoader)
        adapters.register_loader("jsonb", TextLoader)
        cursor.execute(sql, params)
        rows = cursor.fetchall()
    if not rows:
        if not Bank.objects.filter(id=bank_id).exists():
            raise NotFound(f"Bank '{bank_id}' not found")
        return ListedPage([], qs.count() if offset else 0, None)
    return ListedPage(_listed(rows, width=len(columns)), int(rows[0][-2]), rows[0][-1])


def _listed(rows: list[tuple[Any, ...]], *, width: int) -> list[ListedModel]:
    """The page's rows as ``ListedModel``, JSON parsed as ``JSONField`` parses it; each distinct
    trigger once, shared by its rows (read-only): a bank's models mostly share a few."""
    triggers: dict[str, Any] = {}
    items = []
    for row in rows:
        values = list(row[:width])
        is_page = row[width]
        text = values[_TRIGGER]
        trigger = triggers.get(text)
        if trigger is None:
            trigger = triggers[text] = json.loads(text)
        values[_TRIGGER] = trigger
        if width > _REFLECT_RESPONSE and values[_REFLECT_RESPONSE] is not None:
            values[_REFLECT_RESPONSE] = json.loads(values[_REFLECT_RESPONSE])
        values += [None] * (_IS_PAGE - width)
        values.append(is_page)
        items.append(ListedModel(*values))
    return items


def mental_model_history(*, bank_id: str, mental_model_id: str) -> list[MentalModelHistory]:
    """Newest first, each version with its ``changes`` (docs/behaviour.md#history): from the
    page it kept to the page after it — the next newer version's kept page, or the model's
    current one for the newest."""
    model = mental_model_get(bank_id=bank_id, mental_model_id=mental_model_id)
    entries = list(model.history.order_by("-changed_at", "-id"))
    after = PageVersion(model.content or "", model.document)
    for entry in entries:
        if entry.kind != HistoryKind.VERSION:
            continue
        before = PageVersion(entry.previous_content or "", entry.previous_document)
        entry.changes = page_diff(before, after)
        after = before
    return entries


class ModelSpend(NamedTuple):
    """What a model's refreshes cost: the tokens of its last completed refresh (None before
    one), and of every refresh attempt of the last 24 hours (the LLM request log)."""

    last_refresh_tokens: int | None
    tokens_last_24h: int


_LAST_REFRESH_TOKENS_SQL = """
SELECT DISTINCT ON (dedupe_key) dedupe_key,
       COALESCE((result_metadata -> 'llm' ->> 'total_tokens')::bigint, 0)
  FROM operations_operation
 WHERE bank_id = ANY(%s) AND dedupe_key = ANY(%s) AND status = 'completed'
 ORDER BY dedupe_key, completed_at DESC
"""
_TOKENS_24H_SQL = """
SELECT o.dedupe_key, SUM(r.input_tokens + r.output_tokens)
  FROM llm_llmrequest r JOIN operations_operation o ON o.id = r.operation_id
 WHERE r.bank_id = ANY(%s) AND r.started_at > clock_timestamp() - interval '24 hours'
   AND o.dedupe_key = ANY(%s)
 GROUP BY o.dedupe_key
"""


def mental_models_spend(models: Sequence[Any]) -> dict[int, ModelSpend]:
    """``ModelSpend`` of each model (by ``uid``), in two queries whatever their number."""
    if not models:
        return {}
    keys = {refresh_dedupe_key(bank_id=m.bank_id, mental_model_id=m.mental_model_id): m.uid
            for m in models}
    banks = sorted({m.bank_id for m in models})
    with connection.cursor() as cursor:
        cursor.execute(_LAST_REFRESH_TOKENS_SQL, [banks, list(keys)])
        last = {key: int(tokens) for key, tokens in cursor.fetchall()}
        cursor.execute(_TOKENS_24H_SQL, [banks, list(keys)])
        day = {key: int(tokens) for key, tokens in cursor.fetchall()}
    return {uid: ModelSpend(last.get(key), day.get(key, 0)) for key, uid in keys.items()}
