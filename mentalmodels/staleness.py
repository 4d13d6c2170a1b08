"""The one staleness rule and the scope a mental model reads (docs/behaviour.md#staleness,
docs/behaviour.md#scope).

A model is stale when a memory in its resolved scope has ``updated_at`` later than its
``last_memory_seen_at`` (a null watermark is earlier than everything), or when a directive that
applies to its scope changed after its last refresh
(docs/behaviour.md#a-directive-change-makes-its-pages-stale: ``directives_changed``, one query
for every bank's change stamps). The scope comes from
``model_scope`` and the check from ``hindsight.infra.tagscope.any_newer_batch`` (its staleness
variant: untagged memories never count under ``any``/``all``). GET, list, reflect, the
automatic triggers and the refresh's own start check all call ``stale_flags``.

``stale_flags`` answers a whole page in a constant number of queries: one
``bank_last_memory_write_at_many`` for every bank of the models given (none when the caller read
the banks' last writes already, as the list does with its page) and one batched scope query for
the models the bank-watermark shortcut cannot settle (a watermark at or after the bank's last
write is fresh without looking at its scope; a bank asked for many distinct scopes adds one
statement counting the range it reads: ``hindsight.infra.tagscope``). It takes model instances or
any rows with their attributes (``Watermarked``: the list's ``ListedModel``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any, Protocol

from django.urls import reverse

from hindsight.banks.selectors import bank_last_memory_write_at_many
from hindsight.infra.tagscope import (
    TagScope,
    any_newer_batch,
    matches,
    parse_tag_groups,
    rule_applies,
)
from mentalmodels.directives.selectors import directive_stamps_many
from mentalmodels.models import MentalModel


class Watermarked(Protocol):
    """What the rule reads of a model: a ``MentalModel`` or a row under its attribute names."""

    @property
    def uid(self) -> int: ...
    @property
    def bank_id(self) -> str: ...
    @property
    def tags(self) -> Sequence[str]: ...
    @property
    def trigger(self) -> Mapping[str, Any] | None: ...
    @property
    def last_memory_seen_at(self) -> datetime | None: ...
    @property
    def last_refreshed_at(self) -> datetime | None: ...


def resolve_scope(*, tags: Iterable[str], trigger: Mapping[str, Any]) -> TagScope:
    """The memories a model with ``tags`` and ``trigger`` reads (docs/behaviour.md#scope).

    ``trigger.tag_groups`` replaces the flat tags; otherwise a tagged model matches
    ``all_strict`` unless ``trigger.tags_match`` says otherwise, and an untagged one reads the
    whole bank. ``trigger.fact_types`` narrows either.
    """
    tags = tuple(tags)
    groups = trigger.get("tag_groups")
    fact_types = trigger.get("fact_types") or None
    parsed_groups = parse_tag_groups(groups, loc=("trigger", "tag_groups")) if groups else None
    if parsed_groups:
        return TagScope(
            tags=(), tags_match="any", tag_groups=parsed_groups, fact_types=fact_types
        )
    if tags:
        return TagScope(
            tags=tags,
            tags_match=trigger.get("tags_match") or "all_strict",
            fact_types=fact_types,
        )
    # No tags: the whole bank (an explicit ``exact`` still means "untagged only").
    return TagScope(tags=(), tags_match=trigger.get("tags_match") or "any", fact_types=fact_types)


def model_scope(model: Watermarked) -> TagScope:
    return resolve_scope(tags=model.tags, trigger=model.trigger or {})


def directives_changed(models: Iterable[Watermarked]) -> set[int]:
    """The uids of the models a directive change applies to since their last refresh (never
    refreshed: any change applies). One query; a model's refresh time is read only in a bank
    whose directives ever changed."""
    models = list(models)
    stamps = directive_stamps_many(bank_ids={m.bank_id for m in models}) if models else {}
    changed: set[int] = set()
    for model in models:
        bank_stamps = stamps.get(model.bank_id)
        if not bank_stamps:
            continue
        refreshed = model.last_refreshed_at
        scope = None
        for tags, changed_at in bank_stamps:
            if refreshed is not None and changed_at <= refreshed:
                continue
            scope = scope or model_scope(model)
            if rule_applies(scope, tags):
                changed.add(model.uid)
                break
    return changed


def stale_flags(
    models: Iterable[Watermarked], *, last_write: Mapping[str, datetime | None] | None = None
) -> dict[int, bool]:
    """``{model.uid: is_stale}`` for every model given, in a constant number of queries.

    ``last_write``: ``bank_last_memory_write_at`` of every bank of the models, when the caller
    read it already (in the same statement as the models: never older than they are).
    """
    models = list(models)
    if not models:
        return {}
    if last_write is None:
        # One query for every bank (the cron tick evaluates models of many banks together).
        last_write = bank_last_memory_write_at_many(bank_ids=(m.bank_id for m in models))
    flags: dict[int, bool] = dict.fromkeys(directives_changed(models), True)
    pending: list[tuple[int, str, TagScope, datetime | None]] = []
    for model in models:
        if model.uid in flags:
            continue
        bank_write = last_write[model.bank_id]
        watermark = model.last_memory_seen_at
        if bank_write is None or (watermark is not None and watermark >= bank_write):
            # Nothing in the bank was written after the watermark, so nothing in scope was.
            flags[model.uid] = False
            continue
        pending.append((model.uid, model.bank_id, model_scope(model), watermark))
    stale = any_newer_batch(pending) if pending else set()
    for uid, *_ in pending:
        flags[uid] = uid in stale
    return flags


def is_stale(model: Watermarked) -> bool:
    return stale_flags([model])[model.uid]


def models_reading(bank_id: str, tags: list[str], fact_type: str) -> list[tuple[str, str]]:
    """The mental models whose scope holds a memory of ``tags`` and ``fact_type`` — the ones a
    change of it makes stale — as ``(name, admin url)``, for the memory's admin page."""
    out: list[tuple[str, str]] = []
    for model in MentalModel.objects.filter(bank_id=bank_id).order_by("name"):
        if matches(model_scope(model), tags, fact_type, staleness=True):
            out.append((f"{model.name} ({model.mental_model_id})",
                        reverse("admin:mentalmodels_mentalmodel_change", args=[model.uid])))
    return out
