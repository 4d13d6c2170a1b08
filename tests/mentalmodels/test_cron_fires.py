"""The tick's shared cron evaluation (``CronFires``) answers exactly what croniter answers per
model: "did the expression fire in (since, now]?", at fire boundaries too."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from croniter import croniter

from mentalmodels.triggers_auto import CronFires

T0 = datetime(2026, 3, 1, 3, 0, tzinfo=UTC)  # a Sunday, 03:00: a fire of most expressions below
EXPRESSIONS = ["0 3 * * *", "*/5 * * * *", "0 4 * * 0", "30 2 1 * *", "0 0 29 2 *"]
OFFSETS = [timedelta(0), timedelta(microseconds=1), -timedelta(microseconds=1),
           timedelta(seconds=30), -timedelta(minutes=5), timedelta(minutes=5), -timedelta(days=1),
           -timedelta(days=400)]


def _per_model(expr: str, since: datetime, now: datetime) -> bool:
    return croniter(expr, since).get_next(datetime) <= now


@pytest.mark.parametrize("expr", EXPRESSIONS)
@pytest.mark.parametrize("now_offset", OFFSETS)
def test_shared_fires_agree_with_croniter_per_model(expr: str, now_offset: timedelta) -> None:
    now = T0 + now_offset
    fires = CronFires(now)
    for since_offset in OFFSETS:
        since = T0 + since_offset
        if since > now:
            continue
        assert fires.fired_since(expr, since) == _per_model(expr, since, now), (expr, since, now)


def test_an_unusable_expression_raises_every_time() -> None:
    fires = CronFires(T0)
    for _ in range(2):
        with pytest.raises((ValueError, KeyError)):
            fires.fired_since("not a cron", T0 - timedelta(days=1))
