"""Reads of mental models: one model, a bank's page of models, a model's history.

The list order is ``last_refreshed_at DESC, id DESC`` with PostgreSQL's default placement of
nulls for ``DESC`` (first): a model no refresh has completed yet sits at the top, next to the
most recently refreshed ones, which is where a user who just created it looks for it.
"""

from __future__ import annotations

from collections.abc import Sequence

from django.db.models import Count, F, QuerySet, Window

from hindsight.banks.models import Bank
from hindsight.errors import NotFound
from mentalmodels.models import MentalModel, MentalModelHistory

LIST_TAGS_MATCH = ("any", "all", "exact")
# The columns a list item reads at each detail level (and staleness: tags, trigger, watermark).
# Never the embedding or the structured document; the content and reflect response only when
# the detail level shows them.
_LIST_FIELDS = (
    "uid", "bank_id", "mental_model_id", "name", "tags", "trigger", "last_refreshed_at",
    "last_memory_seen_at", "last_refresh_failed_at", "last_full_refreshed_at", "created_at",
)
LIST_FIELDS_BY_DETAIL = {
    "metadata": _LIST_FIELDS,
    "content": (*_LIST_FIELDS, "source_query", "content", "max_tokens"),
    "full": (*_LIST_FIELDS, "source_query", "content", "max_tokens", "reflect_response"),
}


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


def mental_models_list(
    *,
    bank_id: str,
    tags: Sequence[str] = (),
    tags_match: str = "any",
    limit: int = 100,
    offset: int = 0,
    detail: str = "full",
) -> tuple[list[MentalModel], int]:
    """One page of a bank's models and the total matching the filter, in one query (the total
    as a window count over the filtered rows); the columns ``detail`` renders, and no others.

    A page with items proves the bank exists; only an empty one costs the existence check (and,
    past the end, a count).
    """
    qs = _tags_filter(MentalModel.objects.filter(bank_id=bank_id), tags, tags_match)
    page: list[MentalModel] = list(
        qs.only(*LIST_FIELDS_BY_DETAIL[detail])
        .annotate(listed_total=Window(Count("uid")))
        .order_by(F("last_refreshed_at").desc(nulls_first=True), F("mental_model_id").desc())
        [offset : offset + limit]
    )
    if page:
        return page, int(getattr(page[0], "listed_total"))  # noqa: B009 - an annotation
    if not Bank.objects.filter(id=bank_id).exists():
        raise NotFound(f"Bank '{bank_id}' not found")
    return page, (qs.count() if offset else 0)


def mental_model_history(*, bank_id: str, mental_model_id: str) -> list[MentalModelHistory]:
    model = mental_model_get(bank_id=bank_id, mental_model_id=mental_model_id)
    return list(model.history.order_by("-changed_at", "-id"))
