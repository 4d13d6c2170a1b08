"""Reads of mental models: one model, a bank's page of models, a model's history.

The list order is ``last_refreshed_at DESC, id DESC`` with PostgreSQL's default placement of
nulls for ``DESC`` (first): a model no refresh has completed yet sits at the top, next to the
most recently refreshed ones, which is where a user who just created it looks for it.
"""

from __future__ import annotations

from collections.abc import Sequence

from django.db.models import F, QuerySet

from hindsight.banks.models import Bank
from hindsight.errors import NotFound
from mentalmodels.models import MentalModel, MentalModelHistory

LIST_TAGS_MATCH = ("any", "all", "exact")


def mental_model_get(*, bank_id: str, mental_model_id: str) -> MentalModel:
    try:
        return MentalModel.objects.get(bank_id=bank_id, mental_model_id=mental_model_id)
    except MentalModel.DoesNotExist:
        raise NotFound(f"Mental model '{mental_model_id}' not found") from None


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


def mental_models_list(
    *,
    bank_id: str,
    tags: Sequence[str] = (),
    tags_match: str = "any",
    limit: int = 100,
    offset: int = 0,
) -> tuple[list[MentalModel], int]:
    """One page of a bank's models and the total matching the filter."""
    if not Bank.objects.filter(id=bank_id).exists():
        raise NotFound(f"Bank '{bank_id}' not found")
    qs = _tags_filter(MentalModel.objects.filter(bank_id=bank_id), tags, tags_match)
    total = qs.count()
    page = list(
        qs.order_by(
            F("last_refreshed_at").desc(nulls_first=True), F("mental_model_id").desc()
        )[offset : offset + limit]
    )
    return page, total


def mental_model_history(*, bank_id: str, mental_model_id: str) -> list[MentalModelHistory]:
    model = mental_model_get(bank_id=bank_id, mental_model_id=mental_model_id)
    return list(model.history.order_by("-changed_at", "-id"))


def mental_model_tags(
    *, bank_id: str, pattern: str | None = None, limit: int = 100, offset: int = 0
) -> tuple[list[dict[str, object]], int]:
    """``GET …/tags?source=mental_models``: the tags on this bank's models with their counts,
    most used first. ``pattern`` is an ``ILIKE`` pattern (``hindsight.banks.selectors.tag_pattern``
    builds it from the request's ``q``). Registered as a tag source in ``MentalModelsConfig``.
    """
    from django.db import connection

    condition = "AND tag ILIKE %s" if pattern else ""
    params: list[object] = [bank_id] + ([pattern] if pattern else [])
    with connection.cursor() as cursor:
        cursor.execute(
            "WITH t AS (SELECT tag, count(*) AS n FROM mentalmodels_mentalmodel mm, "
            f"unnest(mm.tags) AS tag WHERE mm.bank_id = %s {condition} GROUP BY tag) "
            "SELECT tag, n, count(*) OVER () FROM t ORDER BY n DESC, tag LIMIT %s OFFSET %s",
            [*params, limit, offset],
        )
        rows = cursor.fetchall()
        if rows:
            total = rows[0][2]
        else:
            cursor.execute(
                "SELECT count(DISTINCT tag) FROM mentalmodels_mentalmodel mm, unnest(mm.tags) AS tag "
                f"WHERE mm.bank_id = %s {condition}",
                params,
            )
            total = cursor.fetchone()[0]
    return [{"tag": tag, "count": n} for tag, n, _ in rows], int(total)
