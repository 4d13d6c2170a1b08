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
