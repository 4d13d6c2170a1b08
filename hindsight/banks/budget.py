"""A bank's LLM token budget: ``llm_token_budget_per_day``, counted over a rolling 24 hours.

The budget is the bank's config key ``llm_token_budget_per_day`` (an integer ≥ 0), else the
deployment's ``HINDSIGHT_API_LLM_TOKEN_BUDGET_PER_DAY``, else none (unlimited). What a bank
spent is read from the LLM request log (``hindsight.infra.llm.models.LLMRequest``): the input and
output tokens of every HTTP request the gateway sent under the bank's ``llm_context`` whose
``started_at`` lies in the last 24 hours — retries, failed requests (0 tokens) and dry runs
included. The log is the one record of spend; nothing here keeps a counter of its own.

A bank is *spent* when what it spent in the window is at or above its budget. It *frees* at the
moment enough of its oldest requests leave the window for the rest to be under the budget:
the ``started_at`` (+ 24 h) of the request at which the running sum of the window, oldest
first, reaches ``spent - budget + 1``.

Who asks:

- every call that would spend now (reflect, a manual refresh, a dry run,
  ``POST …/consolidate``) calls ``bank_budget_require``: spent → ``BudgetSpent``, a 429 whose
  body names the budget, what was spent and when it frees;
- a retain with LLM extraction, sync or async, asks ``bank_budget_spent``: spent → it is
  queued parked (``budget_parked_by``, until ``park_until``) with its whole batch, never
  refused (docs/behaviour.md#over-budget-nothing-is-lost);
- the operations engine, before it claims a due operation of a type that spends, through the
  handler's ``hold`` (``budget_hold``): spent → the operation is parked until the bank frees,
  ``result_metadata.parked_by`` naming the budget (automatic and manual alike: what was
  accepted before the bank was spent waits rather than overspends);
- consolidation between its rounds (a spent bank ends the chain early and queues the
  continuation, which the engine then parks);
- ``bank_config_update``: a changed budget releases the bank's budget-parked operations at
  once (``operations.queue.operations_release_parked``); one spent still is parked again when
  it is claimed.

The check and the spend are not one transaction (a check would have to hold a lock across LLM
calls): two calls that both pass the check while the bank is under its budget both run to the
end. So the window's spend exceeds the budget by at most what the calls running at the moment
of the crossing cost — one call (operation or API request) per worker slot and per API request
in flight.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import connection
from django.db.models import BigIntegerField, F, OuterRef, Subquery, Sum
from prometheus_client.core import GaugeMetricFamily, Metric

from hindsight.banks.models import Bank
from hindsight.infra.db import ClockTimestamp
from hindsight.infra.errors import TooManyRequests
from hindsight.infra.llm.models import LLMRequest
from hindsight.infra.vocabulary import iso
from operations.queue import operations_release_parked
from operations.registry import Hold, Pending

BUDGET_KEY = "llm_token_budget_per_day"
WINDOW = timedelta(hours=24)
# ``result_metadata["parked_by"]["reason"]`` of an operation the budget parked.
PARKED_BY_BUDGET = "llm_token_budget"
# A bank whose budget is 0 never frees by itself: its parked work is looked at again this often.
RECHECK_WITHOUT_FREEING = WINDOW

_TABLE = LLMRequest._meta.db_table
_SPENT_SQL = f"""
SELECT COALESCE(SUM(input_tokens + output_tokens), 0), clock_timestamp()
  FROM {_TABLE}
 WHERE bank_id = %s AND started_at > clock_timestamp() - interval '24 hours'
"""
# The oldest request at which the window's running sum reaches the excess: once it leaves the
# window, what is left is under the budget.
_FREES_SQL = f"""
SELECT started_at FROM (
    SELECT started_at,
           SUM(input_tokens + output_tokens) OVER (ORDER BY started_at, id) AS running
      FROM {_TABLE}
     WHERE bank_id = %s AND started_at > %s) window_rows
 WHERE running >= %s
 ORDER BY started_at
 LIMIT 1
"""
_SPENT_BY_BANK_SQL = f"""
SELECT bank_id, SUM(input_tokens + output_tokens)
  FROM {_TABLE}
 WHERE bank_id IS NOT NULL AND started_at > clock_timestamp() - interval '24 hours'
 GROUP BY bank_id
"""


@dataclass(frozen=True)
class BankSpend:
    """What a bank spent in the last 24 hours against its budget, at ``now`` (database clock)."""

    bank_id: str
    budget: int | None
    spent: int
    now: datetime
    frees_at: datetime | None = None  # set when spent: when the window is under budget again

    @property
    def exhausted(self) -> bool:
        return self.budget is not None and self.spent >= self.budget

    @property
    def park_until(self) -> datetime:
        """When parked work should be looked at again: when the bank frees (a budget of 0
        never frees by itself: a day later, unless the budget changes first)."""
        return self.frees_at or self.now + RECHECK_WITHOUT_FREEING

    def message(self) -> str:
        frees = (
            f"it frees at {self.frees_at.isoformat()}" if self.frees_at is not None
            else "it frees only when the budget is raised"
        )
        return (
            f"bank '{self.bank_id}' has spent its LLM token budget: {self.spent} tokens in the "
            f"last 24 hours, budget {self.budget} a day ({BUDGET_KEY}); {frees}"
        )

    def as_dict(self) -> dict[str, Any]:
        return {
            BUDGET_KEY: self.budget,
            "llm_tokens_last_24h": self.spent,
            "frees_at": iso(self.frees_at),
        }


class BudgetSpent(TooManyRequests):
    """429: the bank has spent its token budget; the body says what, and when it frees."""

    def __init__(self, spend: BankSpend):
        super().__init__(spend.message())
        self.spend = spend

    def body_extra(self) -> dict[str, Any]:
        return {"budget": self.spend.as_dict()}

    def headers(self) -> dict[str, str]:
        wait = (self.spend.park_until - self.spend.now).total_seconds()
        return {"Retry-After": str(max(1, math.ceil(wait)))}


def bank_token_budget(*, config: dict[str, Any] | None) -> int | None:
    """The bank's own budget if its config sets one, else the deployment's (None: unlimited)."""
    own = (config or {}).get(BUDGET_KEY)
    if own is not None:
        return int(own)
    return settings.HINDSIGHT.llm_token_budget_per_day


def _config(bank_id: str) -> dict[str, Any]:
    return Bank.objects.filter(id=bank_id).values_list("config", flat=True).first() or {}


def bank_tokens_last_24h_subquery() -> Subquery:
    """The tokens of the last 24 hours of the bank ``OuterRef("id")`` names (a list's column)."""
    rows = (
        LLMRequest.objects.filter(bank_id=OuterRef("id"),
                                  started_at__gt=ClockTimestamp() - WINDOW)
        .order_by().values("bank_id")
        .annotate(total=Sum(F("input_tokens") + F("output_tokens"))).values("total")
    )
    return Subquery(rows, output_field=BigIntegerField())


def bank_spend(*, bank_id: str, config: dict[str, Any] | None = None) -> BankSpend:
    """The bank's spend in the last 24 hours and its budget (``frees_at`` when it is spent)."""
    budget = bank_token_budget(config=_config(bank_id) if config is None else config)
    with connection.cursor() as cursor:
        cursor.execute(_SPENT_SQL, [bank_id])
        spent, now = cursor.fetchone()
        spend = BankSpend(bank_id=bank_id, budget=budget, spent=int(spent), now=now)
        if not spend.exhausted:
            return spend
        assert budget is not None
        cursor.execute(_FREES_SQL, [bank_id, now - WINDOW, spend.spent - budget + 1])
        row = cursor.fetchone()
    frees_at = row[0] + WINDOW if row is not None else None
    return BankSpend(bank_id=bank_id, budget=budget, spent=spend.spent, now=now,
                     frees_at=frees_at)


def bank_budget_spent(*, bank_id: str) -> BankSpend | None:
    """The bank's spend when it has spent its budget, else None. One query for a bank without
    a budget (its config), two with one."""
    config = _config(bank_id)
    if bank_token_budget(config=config) is None:
        return None
    spend = bank_spend(bank_id=bank_id, config=config)
    return spend if spend.exhausted else None


def bank_budget_require(*, bank_id: str) -> None:
    """Before a call that would spend: ``BudgetSpent`` (429) when the bank's budget is spent."""
    spend = bank_budget_spent(bank_id=bank_id)
    if spend is not None:
        raise BudgetSpent(spend)


def budget_parked_by(spend: BankSpend) -> dict[str, Any]:
    """What an operation the budget parked says about it (``result_metadata["parked_by"]``)."""
    return {"reason": PARKED_BY_BUDGET, "message": spend.message(), **spend.as_dict()}


def budget_hold(pending: Pending) -> Hold | None:
    """A handler's ``hold``: park the operation until its bank frees when the bank is spent."""
    spend = bank_budget_spent(bank_id=pending.bank_id)
    if spend is None:
        return None
    return Hold(until=spend.park_until, parked_by=budget_parked_by(spend))


def budget_parked_release(*, bank_id: str) -> list[Any]:
    """The bank's budget changed: send its budget-parked operations now (after commit). One
    the bank's new budget still holds back is parked again when it is claimed."""
    return operations_release_parked(bank_id=bank_id, reason=PARKED_BY_BUDGET)


def banks_spend() -> dict[str, tuple[int | None, int]]:
    """Every bank with a budget or with spend in the last 24 hours: ``{bank: (budget, spent)}``
    (the Prometheus gauges; two queries whatever the number of banks)."""
    with connection.cursor() as cursor:
        cursor.execute(_SPENT_BY_BANK_SQL)
        spent = {bank: int(total) for bank, total in cursor.fetchall()}
    default = settings.HINDSIGHT.llm_token_budget_per_day
    budgets: dict[str, int | None] = {}
    if default is not None:
        budgets = {bank: default for bank in Bank.objects.values_list("id", flat=True)}
    for bank, own in Bank.objects.filter(config__has_key=BUDGET_KEY).values_list(
            "id", f"config__{BUDGET_KEY}"):
        if own is not None:
            budgets[bank] = int(own)
    return {bank: (budgets.get(bank), spent.get(bank, 0)) for bank in {*spent, *budgets}}


class SpendCollector:
    """Prometheus gauges read at scrape time: each bank's tokens of the last 24 hours and its
    budget (banks without a budget have no budget series). Registered with ``/metrics`` in
    ``BanksConfig.ready``."""

    def collect(self) -> Iterator[Metric]:
        spend = banks_spend()
        spent = GaugeMetricFamily(
            "hindsight_llm_tokens_last_24h",
            "LLM tokens (input + output) a bank spent in the last 24 hours, from the request log.",
            labels=["bank"],
        )
        budget = GaugeMetricFamily(
            "hindsight_llm_token_budget_per_day",
            "A bank's LLM token budget over a rolling 24 hours (llm_token_budget_per_day).",
            labels=["bank"],
        )
        for bank, (limit, tokens) in sorted(spend.items()):
            spent.add_metric([bank], tokens)
            if limit is not None:
                budget.add_metric([bank], limit)
        yield spent
        yield budget
