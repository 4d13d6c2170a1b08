"""Automatic refreshes of mental models: the one gate every automatic trigger passes, and the
cron tick that drives ``refresh_cron`` / ``full_refresh_cron``.

Owns staleness gating, the cron tick, the rate floor and the trigger side of the pause (a paused
model gets no automatic refresh; docs/behaviour.md#scheduling):

- ``mental_models_refresh_auto`` (and ``mental_model_refresh_auto`` for one model) is the only way
  an automatic trigger queues a refresh: paused → nothing; not stale → nothing and no LLM request
  (unless the trigger is a periodic full rebuild); inside the rate floor, or inside the backoff
  after transient failures (``auto_refresh_not_before``, ``mentalmodels.refresh.failure_class``) → the
  refresh is queued *parked* until the later of the two ends (later triggers fold into it);
  otherwise queued now.
  Staleness is answered for all the models together (``stale_flags``), bank floors in one query.
- ``mental_models_cron_tick(now=)`` finds the models whose cron fired since their last refresh
  (and since the previous tick handled them: ``MentalModel.cron_checked_at``), claims those fires
  with one compare-and-set UPDATE (concurrent ticks cannot both act on a fire), and passes them
  through the gate. A tick with nothing due costs one query.
- ``on_consolidation_completed(event)`` (docs/behaviour.md#after-consolidation), registered with
``hindsight.banks.hooks`` in
  ``MentalModelsConfig.ready``: when a consolidation chain of a bank completes, one query reads
  the bank's unpaused models with ``refresh_after_consolidation``; those whose scope the chain
  touched (``tagscope.matches``, staleness variant: untagged writes never wake a strictly tagged
  model) go through the gate, which re-checks staleness in one batch.

Manual refreshes never come here: they ignore the floor and release a parked refresh by folding
into it (``operations.queue.operation_submit``).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from croniter import croniter
from django.conf import settings
from django.db import connection, transaction
from django.db.models import Q
from django.db.models.fields.json import KT
from django.utils import timezone

from hindsight.banks.hooks import ConsolidationCompleted
from hindsight.banks.models import Bank
from hindsight.infra.tagscope import matches
from mentalmodels.models import PAUSED, MentalModel
from mentalmodels.review.selectors import proposal_pending
from mentalmodels.services import mental_model_refresh_submit
from mentalmodels.staleness import model_scope, stale_flags
from operations.models import PENDING

log = logging.getLogger(__name__)

QUEUED = "queued"
PARKED = "parked"
SKIPPED_PAUSED = "skipped_paused"
# docs/behaviour.md#review-before-apply: a proposal of the model waits for review.
SKIPPED_REVIEW = "skipped_review_pending"
SKIPPED_FRESH = "skipped_fresh"
SKIPPED_GONE = "skipped_gone"

# Trigger reasons (logged; the tick's report counts them).
REASON_CRON = "refresh_cron"
REASON_FULL_CRON = "full_refresh_cron"
REASON_CONSOLIDATION = "refresh_after_consolidation"

BANK_FLOOR_KEY = "mental_model_min_refresh_interval_seconds"
# Due models claimed and gated per round: bounds one UPDATE's row locks and one staleness batch.
TICK_CHUNK = 200

# What the gate and the tick read of a model (never the document or the embedding).
_GATE_FIELDS = (
    "uid", "bank_id", "mental_model_id", "name", "tags", "trigger", "created_at",
    "last_refreshed_at", "last_full_refreshed_at", "last_memory_seen_at",
    "last_refresh_failed_at", "last_refresh_failure_transient", "auto_refresh_not_before",
    "cron_checked_at",
)


@dataclass(frozen=True)
class AutoRefresh:
    """What the gate did with one model's automatic trigger."""

    bank_id: str
    mental_model_id: str
    action: str  # QUEUED | PARKED | SKIPPED_PAUSED | SKIPPED_REVIEW | SKIPPED_FRESH | SKIPPED_GONE
    reason: str
    operation: Any = None  # operations.models.Operation when queued or parked
    not_before: datetime | None = None  # when a parked refresh becomes due


# ---------------------------------------------------------------------------------------------
# The rate floor (docs/behaviour.md#the-rate-floor)


def refresh_floor_seconds(*, model: MentalModel, bank_config: dict[str, Any] | None) -> float:
    """The model's ``min_refresh_interval_seconds`` if set (0 exempts it), else the bank's
    ``mental_model_min_refresh_interval_seconds``, else the deployment's setting."""
    own = (model.trigger or {}).get("min_refresh_interval_seconds")
    if own is not None:
        return float(own)
    bank_value = (bank_config or {}).get(BANK_FLOOR_KEY)
    if bank_value is not None:
        return float(bank_value)
    return float(settings.HINDSIGHT.mental_model_min_refresh_interval_seconds)


def floor_not_before(*, last_refreshed_at: datetime | None, floor_seconds: float,
                     now: datetime) -> datetime | None:
    """When the rate-floor window closes, if ``now`` is inside it (else None: run now)."""
    if floor_seconds <= 0 or last_refreshed_at is None:
        return None
    end = last_refreshed_at + timedelta(seconds=floor_seconds)
    return end if end > now else None


def _bank_configs(bank_ids: Iterable[str]) -> dict[str, dict[str, Any]]:
    return dict(Bank.objects.filter(id__in=set(bank_ids)).values_list("id", "config"))


# ---------------------------------------------------------------------------------------------
# The gate every automatic trigger passes


def _submit_unless_paused(
    *, model: MentalModel, mode: str | None, not_before: datetime | None, now: datetime
) -> tuple[str, Any]:
    """Queue under the model's row lock, re-reading the pause flag and the failure backoff.

    The final failure of a refresh sets both under the same row lock and, in the same
    transaction, cancels (pause) or parks (backoff) the automatic refreshes of the model: either
    it commits first (we see the flag and queue nothing, or see the backoff and park until it
    ends) or our refresh exists when it cancels or parks (and is cancelled or parked). A model
    deleted since it was read gets nothing.
    """
    with transaction.atomic():
        rows = list(
            MentalModel.objects.select_for_update()
            .filter(uid=model.uid)
            .values_list("last_refresh_failed_at", "last_refresh_failure_transient",
                         "auto_refresh_not_before")
        )
        if not rows:
            return SKIPPED_GONE, None
        failed_at, transient, backoff = rows[0]
        if failed_at is not None and not transient:
            return SKIPPED_PAUSED, None
        if backoff is not None and backoff > now:  # after transient failures (failure_backoff)
            not_before = max(not_before or backoff, backoff)
        if proposal_pending(model_uid=model.uid):
            return SKIPPED_REVIEW, None
        operation = mental_model_refresh_submit(
            model=model, mode=mode, automatic=True, not_before=not_before
        )
    parked = operation.status == PENDING and operation.next_retry_at is not None
    return (PARKED if parked else QUEUED), operation


def mental_models_refresh_auto(
    *,
    models: Sequence[MentalModel],
    reason: str,
    mode: str | None = None,
    regardless_of_staleness: bool = False,
    now: datetime | None = None,
) -> list[AutoRefresh]:
    """Gate and queue automatic refreshes of ``models`` (one result per model, same order).

    ``regardless_of_staleness`` is for periodic full rebuilds (``full_refresh_cron``, with
    ``mode="full"``); every other automatic trigger spends nothing on a fresh model. Queries:
    one staleness batch, one bank-config read, then only per model actually queued.
    """
    now = now or timezone.now()
    active = [m for m in models if not m.paused]
    flags = {} if regardless_of_staleness else stale_flags(active)
    due = [m for m in active if regardless_of_staleness or flags[m.uid]]
    needs_bank = {m.bank_id for m in due if (m.trigger or {}).get("min_refresh_interval_seconds") is None}
    configs = _bank_configs(needs_bank) if needs_bank else {}
    due_uids = {m.uid for m in due}

    results: list[AutoRefresh] = []
    for model in models:
        ids: dict[str, Any] = {"bank_id": model.bank_id, "mental_model_id": model.mental_model_id,
                               "reason": reason}
        if model.paused:
            results.append(AutoRefresh(action=SKIPPED_PAUSED, **ids))
            continue
        if model.uid not in due_uids:
            results.append(AutoRefresh(action=SKIPPED_FRESH, **ids))
            continue
        not_before = floor_not_before(
            last_refreshed_at=model.last_refreshed_at,
            floor_seconds=refresh_floor_seconds(model=model, bank_config=configs.get(model.bank_id)),
            now=now,
        )
        action, operation = _submit_unless_paused(model=model, mode=mode, not_before=not_before,
                                                  now=now)
        # Parked: until the window closes, or until the park it folded into ends.
        results.append(AutoRefresh(action=action, operation=operation,
                                   not_before=operation.next_retry_at if action == PARKED else None,
                                   **ids))
        log.info("automatic refresh (%s) of %s/%s: %s%s", reason, model.bank_id,
                 model.mental_model_id, action,
                 f" until {operation.next_retry_at.isoformat()}" if action == PARKED else "")
    return results


def mental_model_refresh_auto(
    *,
    model: MentalModel,
    reason: str,
    mode: str | None = None,
    regardless_of_staleness: bool = False,
    now: datetime | None = None,
) -> AutoRefresh:
    """``mental_models_refresh_auto`` for one model."""
    [result] = mental_models_refresh_auto(
        models=[model], reason=reason, mode=mode,
        regardless_of_staleness=regardless_of_staleness, now=now,
    )
    return result


# ---------------------------------------------------------------------------------------------
# The cron tick (docs/behaviour.md#the-cron-tick)


class CronFires:
    """"Did ``expr`` fire in ``(since, now]``?" for one tick's ``now``, many models.

    That holds exactly when the latest fire at or before ``now`` is later than ``since``, and
    that latest fire depends on the expression only: croniter runs once per distinct
    expression per tick (~0.5 ms each), not once per model (10,000 models: 5 s of CPU a tick).
    """

    def __init__(self, now: datetime) -> None:
        self.now = now.astimezone(UTC)
        self._latest: dict[str, datetime | Exception] = {}

    def fired_since(self, expr: str, since: datetime) -> bool:
        latest = self._latest.get(expr)
        if latest is None:
            try:
                # The first fire after now, then the one before it: the latest at or before now.
                following = croniter(expr, self.now).get_next(datetime)
                latest = croniter(expr, following).get_prev(datetime)
            except (ValueError, KeyError) as exc:
                latest = exc
            self._latest[expr] = latest
        if isinstance(latest, Exception):
            raise latest
        return latest > since


def cron_due(model: MentalModel, *, now: datetime, fires: CronFires | None = None) -> str | None:
    """Which cron of ``model`` fired since its last refresh and the tick's last look: the full
    rebuild (``REASON_FULL_CRON``) wins over the plain one (``REASON_CRON``); None if neither.
    ``fires`` is the tick's shared ``CronFires`` for ``now``."""
    fires = fires or CronFires(now)
    trigger = model.trigger or {}
    checked = model.cron_checked_at
    for reason, key, last in (
        (REASON_FULL_CRON, "full_refresh_cron", model.last_full_refreshed_at),
        (REASON_CRON, "refresh_cron", model.last_refreshed_at),
    ):
        expr = trigger.get(key)
        if not expr:
            continue
        since = max(t for t in (last or model.created_at, checked) if t is not None)
        try:
            if fires.fired_since(expr, since):
                return reason
        except (ValueError, KeyError) as exc:  # validated on write; never let one row stop the tick
            log.warning("mental model %s/%s: unusable %s %r: %s", model.bank_id,
                        model.mental_model_id, key, expr, exc)
    return None


def _claim_fires(models: Sequence[MentalModel], *, now: datetime) -> set[int]:
    """Mark the fires of ``models`` handled (``cron_checked_at = now``) by compare-and-set on
    the value this tick read: a concurrent tick that read the same value claims nothing."""
    if not models:
        return set()
    table = MentalModel._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            UPDATE {table} AS mm SET cron_checked_at = %s
              FROM unnest(%s::bigint[], %s::timestamptz[]) AS seen(uid, checked)
             WHERE mm.uid = seen.uid
               AND mm.cron_checked_at IS NOT DISTINCT FROM seen.checked
            RETURNING mm.uid
            """,
            [now, [m.uid for m in models], [m.cron_checked_at for m in models]],
        )
        return {row[0] for row in cursor.fetchall()}


@dataclass
class CronTickReport:
    evaluated: int = 0
    due: int = 0
    results: list[AutoRefresh] = field(default_factory=list)

    def counts(self) -> dict[str, int]:
        out = {"evaluated": self.evaluated, "due": self.due}
        for result in self.results:
            out[result.action] = out.get(result.action, 0) + 1
        return out


def mental_models_cron_tick(*, now: datetime | None = None) -> CronTickReport:
    """One tick: queue an automatic refresh for every model whose cron came due
    (docs/behaviour.md#the-cron-tick).

    ``refresh_cron`` due → through the gate (pause, staleness, floor). ``full_refresh_cron``
    due → a full rebuild through the gate regardless of staleness (pause and floor still
    apply). A due fire is handled once: queued, parked or skipped, the tick does not act on it
    again, and a model that turns stale after a skipped fire waits for its next fire.
    """
    now = now or timezone.now()
    report = CronTickReport()
    candidates = list(
        MentalModel.objects.annotate(
            cron_expr=KT("trigger__refresh_cron"), full_cron_expr=KT("trigger__full_refresh_cron")
        )
        .filter(Q(cron_expr__isnull=False) | Q(full_cron_expr__isnull=False))
        .only(*_GATE_FIELDS)
        .order_by("uid")
    )
    report.evaluated = len(candidates)
    due: list[tuple[MentalModel, str]] = []
    fires = CronFires(now)
    for model in candidates:
        reason = cron_due(model, now=now, fires=fires)
        if reason is not None:
            due.append((model, reason))
    for start in range(0, len(due), TICK_CHUNK):
        chunk = due[start:start + TICK_CHUNK]
        claimed = _claim_fires([m for m, _ in chunk], now=now)
        full = [m for m, reason in chunk if reason == REASON_FULL_CRON and m.uid in claimed]
        plain = [m for m, reason in chunk if reason == REASON_CRON and m.uid in claimed]
        report.due += len(full) + len(plain)
        if full:
            report.results += mental_models_refresh_auto(
                models=full, reason=REASON_FULL_CRON, mode="full",
                regardless_of_staleness=True, now=now,
            )
        if plain:
            report.results += mental_models_refresh_auto(models=plain, reason=REASON_CRON, now=now)
    return report


# ---------------------------------------------------------------------------------------------
# After consolidation (docs/behaviour.md#after-consolidation)


def on_consolidation_completed(event: ConsolidationCompleted) -> list[AutoRefresh]:
    """Queue the ``refresh_after_consolidation`` refreshes one consolidation chain calls for.

    Runs inside the transaction completing the consolidation (``hindsight.banks.hooks``): the
    refreshes commit with it. One candidate query for the whole chain, then the gate.
    """
    candidates = list(
        MentalModel.objects.filter(
            bank_id=event.bank_id,
            trigger__refresh_after_consolidation=True,
        )
        .exclude(PAUSED)
        .only(*_GATE_FIELDS)
        .order_by("uid")
    )
    touched = [
        model for model in candidates
        if any(matches(model_scope(model), tags, fact_type, staleness=True)
               for tags, fact_type in event.scopes)
    ]
    if not touched:
        return []
    return mental_models_refresh_auto(models=touched, reason=REASON_CONSOLIDATION)
