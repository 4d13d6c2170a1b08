"""Writes of directives: create, update, delete (docs/behaviour.md#directives).

Every write that changes what a prompt would carry — a new active directive, an edit of an
active one's name, text, priority, tags or state, the deletion of an active one — stamps the
tag sets it touched (``DirectiveScopeStamp``, on the database clock, in the same transaction):
the pages those directives apply to read stale from then on
(docs/behaviour.md#a-directive-change-makes-its-pages-stale). An inactive directive changed
and still inactive touches no prompt and stamps nothing.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from django.db import connection, transaction

from hindsight.banks.services import bank_ensure
from hindsight.infra.db import ClockTimestamp
from mentalmodels.directives.models import Directive, DirectiveScopeStamp
from mentalmodels.directives.selectors import directive_get

# What a prompt shows of a directive (its order and its words) and whether it shows it at all.
_PROMPT_FIELDS = ("name", "content", "priority", "is_active", "tags")


def _tag_set(tags: Iterable[str]) -> list[str]:
    return sorted(set(tags))


def _stamp(*, bank_id: str, tags: Iterable[str]) -> None:
    table = DirectiveScopeStamp._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {table} (bank_id, tags, changed_at) VALUES (%s, %s, clock_timestamp()) "
            "ON CONFLICT (bank_id, tags) DO UPDATE SET changed_at = EXCLUDED.changed_at",
            [bank_id, _tag_set(tags)],
        )


@transaction.atomic
def directive_create(
    *,
    bank_id: str,
    name: str,
    content: str,
    priority: int = 0,
    is_active: bool = True,
    tags: Sequence[str] = (),
    mark_pages_stale: bool = True,
) -> Directive:
    """A new directive (the bank created if it does not exist).

    ``mark_pages_stale=False`` is for a directive restored together with the pages written
    under it (a bank moved here): those pages are no staler for it.
    """
    bank_ensure(bank_id=bank_id)
    directive = Directive.objects.create(
        bank_id=bank_id, name=name, content=content, priority=priority, is_active=is_active,
        tags=list(dict.fromkeys(tags)),
    )
    if is_active and mark_pages_stale:
        _stamp(bank_id=bank_id, tags=directive.tags)
    directive.refresh_from_db(fields=["created_at", "updated_at"])
    return directive


@transaction.atomic
def directive_update(
    *,
    bank_id: str,
    directive_id: str,
    name: str | None = None,
    content: str | None = None,
    priority: int | None = None,
    is_active: bool | None = None,
    tags: Sequence[str] | None = None,
) -> Directive:
    """PATCH: ``None`` leaves a field as it is."""
    directive = directive_get(bank_id=bank_id, directive_id=directive_id)
    directive = Directive.objects.select_for_update().get(pk=directive.pk)
    before = {field: getattr(directive, field) for field in _PROMPT_FIELDS}
    changes = {"name": name, "content": content, "priority": priority, "is_active": is_active,
               "tags": None if tags is None else list(dict.fromkeys(tags))}
    for field, value in changes.items():
        if value is not None:
            setattr(directive, field, value)
    directive.updated_at = ClockTimestamp()
    directive.save()
    after = {field: getattr(directive, field) for field in _PROMPT_FIELDS}
    if before != after:
        # The pages it applied to and the pages it applies to now (a move between tag sets).
        for state in (before, after):
            if state["is_active"]:
                _stamp(bank_id=bank_id, tags=state["tags"])
    directive.refresh_from_db(fields=["updated_at"])
    return directive


@transaction.atomic
def directive_delete(*, bank_id: str, directive_id: str) -> None:
    directive = directive_get(bank_id=bank_id, directive_id=directive_id)
    deleted, _ = Directive.objects.filter(pk=directive.pk).delete()
    if deleted and directive.is_active:
        _stamp(bank_id=bank_id, tags=directive.tags)
