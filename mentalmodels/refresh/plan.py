"""What a refresh will read: the plan (mode, scope, snapshot cutoff, exclusions;
docs/behaviour.md#a-refresh) and the precheck's reads (the newest memory in scope, a sibling mental
model in reach, docs/behaviour.md#no-llm-when-nothing-is-in-reach).

The watermark stored is the newest ``updated_at`` in the model's scope visible at the snapshot
cutoff (docs/behaviour.md#the-snapshot-cutoff): the write clock guarantees every memory stamped at
or before the cutoff had committed when it was taken, so the refresh could read it, and every later
write is stamped after the cutoff and stays "newer" for the next refresh. It is never ``now()``.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.db import connection

from hindsight.banks import writeclock
from hindsight.infra.tagscope import scope_sql
from hindsight.infra.vocabulary import ModeFallbackReason, RefreshMode
from mentalmodels.models import MentalModel
from mentalmodels.reflect import mm_search
from mentalmodels.refresh.records import Plan
from mentalmodels.staleness import directives_changed, model_scope


def refresh_plan(model: MentalModel, *, mode: str | None) -> Plan:
    """The plan of one refresh; takes the snapshot cutoff (its first read)."""
    trigger = model.trigger or {}
    full = RefreshMode.FULL
    requested = full if mode == full else (trigger.get("mode") or full)
    effective, fallback = requested, None
    if requested == RefreshMode.DELTA:
        # docs/behaviour.md#when-delta-falls-back-to-full: a delta refresh falls back to full only
        # without content to edit, or when the source query changed since the last successful
        # refresh.
        if not (model.content or "").strip():
            effective, fallback = full, ModeFallbackReason.NO_BASELINE_CONTENT
        elif (
            model.last_refresh_source_query is not None
            and model.last_refresh_source_query != model.source_query
        ):
            effective, fallback = full, ModeFallbackReason.SOURCE_QUERY_CHANGED
    rewrite = effective == RefreshMode.DELTA and model.uid in directives_changed([model])
    if rewrite:
        # docs/behaviour.md#a-directive-change-makes-its-pages-stale: edits of the new facts
        # cannot make the rest of the page follow a changed rule; a full answer can. (Upstream's
        # fallback reasons have no word for it: the trace's warning says why.)
        effective = full
    exclude_ids = list(dict.fromkeys([*(trigger.get("exclude_mental_model_ids") or []),
                                      model.mental_model_id]))
    return Plan(
        model=model,
        requested_mode=requested,
        effective_mode=effective,
        mode_fallback_reason=fallback,
        scope=model_scope(model),
        cutoff=writeclock.take_cutoff(model.bank_id),
        window_after=model.last_memory_seen_at if effective == RefreshMode.DELTA else None,
        exclude_mental_models=bool(trigger.get("exclude_mental_models")),
        exclude_ids=exclude_ids,
        budget=trigger.get("budget") or "mid",
        response_schema=trigger.get("response_schema"),
        keep_trace=bool(trigger.get("keep_trace")),
        directives_changed=rewrite,
    )


def newest_in_scope(plan: Plan, *, after: datetime | None, changes: bool = True
                    ) -> datetime | None:
    """The newest ``updated_at`` in the model's (recall) scope at or before the cutoff, or the
    newest curation change of a memory that was in it, if later: an invalidated, deleted or
    re-tagged memory is something to take in too (docs/behaviour.md#staleness). ``changes``
    False: the memories alone, what the reflect loop can read."""
    where, params = scope_sql(plan.scope, alias="m")
    window: list[Any] = [plan.model.bank_id, plan.cutoff, *([after] if after else [])]
    memories = (
        "(SELECT MAX(m.updated_at) FROM banks_memoryunit m "
        f"WHERE m.bank_id = %s AND m.updated_at <= %s {'AND m.updated_at > %s' if after else ''} "
        f"AND {where})"
    )
    args: list[Any] = [*window, *params]
    sql = f"SELECT {memories}"
    if changes:
        changed_where, changed_params = scope_sql(plan.scope, alias="c")
        sql = (
            f"SELECT GREATEST({memories}, (SELECT MAX(c.changed_at) FROM banks_memorychange c "
            f"WHERE c.bank_id = %s AND c.changed_at <= %s {'AND c.changed_at > %s' if after else ''} "
            f"AND {changed_where}))"
        )
        args += [*window, *changed_params]
    with connection.cursor() as cursor:
        cursor.execute(sql, args)
        (newest,) = cursor.fetchone()
    return newest


def sibling_in_reach(plan: Plan) -> bool:
    """A full refresh that may read mental models has something to read in one with content."""
    if plan.exclude_mental_models or plan.effective_mode != RefreshMode.FULL:
        return False

    return (
        mm_search.visible_models(bank_id=plan.model.bank_id, scope=plan.scope, exclude_ids=plan.exclude_ids)
        .exclude(content="")
        .exists()
    )
