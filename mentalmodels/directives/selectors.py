"""Reads of directives: one, a page of them (the API's list and its tag filter), the ones a
request applies (docs/behaviour.md#directives) and when the directives of each tag set last
changed (the staleness rule's input).

Which tagged directives a scope selects is the one tag-scope compiler's rule for bank-wide
rules (``hindsight.infra.tagscope.rule_scope_sql`` / ``rule_applies``).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass, replace
from datetime import datetime

from django.db.models import BooleanField, QuerySet
from django.db.models.expressions import RawSQL

from hindsight.banks.selectors import bank_exists
from hindsight.infra.errors import NotFound
from hindsight.infra.tagscope import TagScope, rule_scope_sql
from mentalmodels.directives.models import Directive, DirectiveScopeStamp

# Upstream's order; the id breaks ties so a paging caller never sees one twice.
ORDER = ("-priority", "-created_at", "-id")


@dataclass(frozen=True)
class DirectivePage:
    items: list[Directive]
    total: int


def directive_get(*, bank_id: str, directive_id: str) -> Directive:
    try:
        key = uuid.UUID(directive_id)
    except ValueError:
        key = None  # no directive has such an id: the same 404 as an unknown one
    directive = (Directive.objects.filter(bank_id=bank_id, id=key).first()
                 if key is not None else None)
    if directive is None:
        raise NotFound(f"Directive '{directive_id}' not found")
    return directive


def _in_scope(queryset: QuerySet[Directive], scope: TagScope) -> QuerySet[Directive]:
    table = Directive._meta.db_table
    sql, params = rule_scope_sql(replace(scope, fact_types=None), alias=f'"{table}"')
    return queryset.filter(RawSQL(sql, params, output_field=BooleanField()))


def directives_list(
    *,
    bank_id: str,
    tags: Iterable[str] = (),
    tags_match: str = "any",
    active_only: bool = True,
    limit: int | None = 100,
    offset: int = 0,
) -> DirectivePage:
    """A page of the bank's directives, highest priority first. Without tags: all of them;
    with tags: the untagged ones and the tagged ones the tags select (as a reflect with those
    tags would apply them)."""
    if not bank_exists(bank_id=bank_id):
        raise NotFound(f"Bank '{bank_id}' not found")
    queryset = Directive.objects.filter(bank_id=bank_id)
    if active_only:
        queryset = queryset.filter(is_active=True)
    tags = tuple(tags)
    if tags:
        queryset = _in_scope(queryset, TagScope(tags=tags, tags_match=tags_match))
    total = queryset.count()
    ordered = queryset.order_by(*ORDER)
    items = list(ordered[offset:offset + limit] if limit is not None else ordered[offset:])
    return DirectivePage(items=items, total=total)


def directives_applicable(
    *, bank_id: str, scope: TagScope, apply_all: bool = False
) -> list[Directive]:
    """The active directives a request of ``scope`` applies, highest priority first: the
    untagged ones and the tagged ones its tag filter selects; every active one with
    ``apply_all``."""
    queryset = Directive.objects.filter(bank_id=bank_id, is_active=True)
    if not apply_all:
        queryset = _in_scope(queryset, scope)
    return list(queryset.order_by(*ORDER))


def directive_stamps_many(
    *, bank_ids: Iterable[str]
) -> dict[str, list[tuple[tuple[str, ...], datetime]]]:
    """For each bank that has any: when the directives of each tag set last changed."""
    out: dict[str, list[tuple[tuple[str, ...], datetime]]] = {}
    rows = DirectiveScopeStamp.objects.filter(bank_id__in=set(bank_ids)).values_list(
        "bank_id", "tags", "changed_at")
    for bank_id, tags, changed_at in rows:
        out.setdefault(bank_id, []).append((tuple(tags), changed_at))
    return out
