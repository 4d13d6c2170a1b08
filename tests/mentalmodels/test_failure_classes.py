"""Failure classes with real workers and the scripted LLM failing on demand: a transient outage
(503) leaves the model unpaused and the next in-scope retain refreshes it once the LLM is back;
a 401 pauses it until a manual refresh; a 429's Retry-After is waited out; a long outage costs
no more requests than the backoff's bound (counted at the scripted server)."""

from __future__ import annotations

import math
import re
import threading
import time
from typing import Any

import pytest
from rest_framework.test import APIClient

from fakes.consolidation_llm import ConsolidatingLLM
from fakes.llm_server import Reply
from mentalmodels.models import MentalModel, MentalModelHistory
from mentalmodels.triggers_auto import mental_model_refresh_auto
from operations.models import Operation
from tests.factories import make_bank, make_memory, make_mental_model
from tests.workers import TEST_TIMINGS, wait_until

pytestmark = pytest.mark.integration

BANK = "failure-class-bank"
API = f"/v1/default/banks/{BANK}"
ATTEMPTS = 1 + TEST_TIMINGS["worker_max_retries"]  # per operation, LLM_MAX_RETRIES=0
# Longer than a round of attempts (~1.5 s with the test timings), so the long-outage test tells
# a working backoff (12 requests in its 12 s) from none (27, over its bound of 18).
BACKOFF = {"HINDSIGHT_API_MENTAL_MODEL_FAILURE_BACKOFF_SECONDS": "2",
           "HINDSIGHT_API_MENTAL_MODEL_FAILURE_BACKOFF_MAX_SECONDS": "8"}


class SwitchableLLM(ConsolidatingLLM):
    """ConsolidatingLLM's answers, except: the replies queued with ``fail_next`` first, then
    ``failure`` for every chat request while it is set. ``times``: when each request came."""

    def __init__(self, server: Any) -> None:
        super().__init__(server)
        self.failure: Reply | None = None
        self.next: list[Reply] = []
        self.times: list[float] = []
        self._times_lock = threading.Lock()

    def fail_next(self, *replies: Reply) -> None:
        with self._times_lock:
            self.next.extend(replies)

    def respond(self, body: dict[str, Any]) -> Reply:
        with self._times_lock:
            self.times.append(time.monotonic())
            queued = self.next.pop(0) if self.next else None
        failure = queued or self.failure
        return failure if failure is not None else super().respond(body)


def transient_failures(api: APIClient) -> float:
    """``hindsight_refresh_failures_total{failure_class="transient"}`` summed over processes."""
    text = api.get("/metrics").content.decode()
    found = re.search(r'^hindsight_refresh_failures_total\{failure_class="transient"\} (\S+)$',
                      text, re.M)
    return float(found.group(1)) if found else 0.0


def model_row(mm_id: str) -> MentalModel:
    return MentalModel.objects.get(bank_id=BANK, mental_model_id=mm_id)


def refresh(api: APIClient, mm_id: str) -> Operation:
    response = api.post(f"{API}/mental-models/{mm_id}/refresh", format="json")
    assert response.status_code == 200, response.content
    op_id = response.json()["operation_id"]
    wait_until(lambda: Operation.objects.get(id=op_id).status in ("completed", "failed"), 60,
               message=f"the refresh of {mm_id} ended")
    return Operation.objects.get(id=op_id)


def team_following_consolidation(llm: Any, worker_factory: Any, *, content: str
                                 ) -> tuple[SwitchableLLM, APIClient]:
    """A tagged model refreshed after consolidation, a fact in its scope, a worker."""
    make_bank(BANK)
    answers = SwitchableLLM(llm)
    make_memory(BANK, "Alice runs the team.", tags=["team"], embed=True)
    make_mental_model(BANK, "team", tags=["team"], content=content,
                      trigger={"refresh_after_consolidation": True})
    worker_factory(env={**llm.env, **BACKOFF}, concurrency=2)
    return answers, APIClient()


def test_a_503_outage_leaves_the_model_unpaused_and_the_next_retain_refreshes_it(
    transactional_db: None, llm: Any, worker_factory: Any, beat: Any,
) -> None:
    answers, api = team_following_consolidation(llm, worker_factory, content="# before the outage")

    counted = transient_failures(api)
    answers.failure = Reply.error(503, "scripted outage")
    failed = refresh(api, "team")
    assert failed.status == "failed" and "503" in failed.error_message
    assert len(llm.requests) == ATTEMPTS  # bounded: one request per attempt
    wait_until(lambda: model_row("team").last_refresh_failed_at is not None, 10,
               message="the failure recorded")
    model = model_row("team")
    assert not model.paused and model.last_refresh_failure_transient
    assert model.refresh_failure_streak == 1 and model.auto_refresh_not_before is not None
    assert model.content == "# before the outage"
    failures = MentalModelHistory.objects.filter(model=model, kind="refresh_failed")
    wait_until(lambda: failures.count() == ATTEMPTS, 10, message="a failure entry per attempt")
    # The API shows the failure (the wire's last_refresh_failed_at), not a pause.
    assert api.get(f"{API}/mental-models/team").json()["last_refresh_failed_at"] is not None
    wait_until(lambda: transient_failures(api) == counted + 1, 10, message="the failure counted")

    answers.failure = None  # the LLM is back: a retain in scope refreshes the model by itself
    retained = api.post(f"{API}/memories", {"items": [{"content": "Bob joined the team",
                                                       "tags": ["team"]}]}, format="json")
    assert retained.status_code == 200, retained.content
    wait_until(lambda: model_row("team").content != "# before the outage", 60,
               message="the refresh after consolidation ran")
    model = model_row("team")
    assert model.last_refresh_failed_at is None and model.refresh_failure_streak == 0
    assert model.auto_refresh_not_before is None and "Bob joined the team" in model.content


def test_a_401_pauses_the_model_until_a_manual_refresh(
    transactional_db: None, llm: Any, worker_factory: Any, beat: Any,
) -> None:
    answers, api = team_following_consolidation(llm, worker_factory, content="# before")

    answers.failure = Reply.error(401, "invalid api key")
    assert refresh(api, "team").status == "failed"
    wait_until(lambda: model_row("team").paused, 10, message="paused")
    assert not model_row("team").last_refresh_failure_transient
    spent = len(llm.requests)

    answers.failure = None  # fixed credentials; automatic triggers still skip the paused model
    refreshes = Operation.objects.filter(bank_id=BANK, operation_type="refresh_mental_model")
    before = set(refreshes.values_list("id", flat=True))
    api.post(f"{API}/memories", {"items": [{"content": "Bob joined the team", "tags": ["team"]}]},
             format="json")
    wait_until(lambda: Operation.objects.filter(bank_id=BANK, operation_type="consolidation",
                                                status="completed").exists(), 60,
               message="the consolidation ran")
    # The consolidation's refreshes commit with its completion: none was queued, not even a
    # parked one (a transient failure's backoff) that a beat tick would release.
    assert set(refreshes.values_list("id", flat=True)) == before
    assert mental_model_refresh_auto(model=model_row("team"), reason="refresh_cron").action == (
        "skipped_paused")
    beat.wait_ticks(2)
    assert set(refreshes.values_list("id", flat=True)) == before
    assert not refreshes.filter(status__in=("pending", "processing")).exists()
    refresh_requests = [b for b in llm.requests[spent:] if b.get("tool_choice") is not None
                        or b.get("tools")]
    assert refresh_requests == []  # nothing spent on the paused model
    assert model_row("team").content == "# before"

    resumed = refresh(api, "team")
    assert resumed.status == "completed", resumed.error_message
    model = model_row("team")
    assert not model.paused and model.last_refresh_failed_at is None
    assert "Bob joined the team" in model.content


def test_a_429_with_retry_after_is_waited_out(
    transactional_db: None, llm: Any, worker_factory: Any, beat: Any,
) -> None:
    make_bank(BANK)
    answers = SwitchableLLM(llm)
    make_memory(BANK, "Alice runs the team.", embed=True)
    make_mental_model(BANK, "team", content="# before")
    worker_factory(env=llm.env, concurrency=1)
    api = APIClient()

    # The first attempt meets a 429 asking for 2 s; the engine's own backoff is 0.2 s.
    answers.fail_next(Reply.error(429, "rate limited", retry_after="2"))
    done = refresh(api, "team")
    assert done.status == "completed", done.error_message
    assert done.retry_count == 1
    waited = answers.times[1] - answers.times[0]
    assert waited >= 2.0, waited  # Retry-After honoured (the backoff alone: under 0.3 s)
    assert not model_row("team").paused


def test_a_long_outage_costs_no_more_requests_than_the_backoff_bound(
    transactional_db: None, llm: Any, worker_factory: Any, beat: Any,
) -> None:
    make_bank(BANK)
    answers = SwitchableLLM(llm)
    model = make_mental_model(BANK, "team", tags=["team"], content="# before",
                              trigger={"refresh_cron": "* * * * *"})
    worker_factory(env={**llm.env, **BACKOFF}, concurrency=2)
    answers.failure = Reply.error(503, "down for good")

    # OUTAGE seconds of triggers every 0.25 s, each with something new in scope: without the
    # backoff every trigger after a failure would start another round of attempts.
    outage, started, triggers = 12.0, time.monotonic(), 0
    while time.monotonic() - started < outage:
        make_memory(BANK, f"news {triggers}", tags=["team"], embed=True)
        mental_model_refresh_auto(model=MentalModel.objects.get(uid=model.uid),
                                  reason="refresh_cron")
        triggers += 1
        time.sleep(0.25)
    elapsed = time.monotonic() - started
    wait_until(lambda: not Operation.objects.filter(
        bank_id=BANK, status="processing").exists(), 30, message="the last attempt ended")

    base, cap = float(BACKOFF["HINDSIGHT_API_MENTAL_MODEL_FAILURE_BACKOFF_SECONDS"]), float(
        BACKOFF["HINDSIGHT_API_MENTAL_MODEL_FAILURE_BACKOFF_MAX_SECONDS"])
    k = 1 + math.log2(cap / base)
    bound = ATTEMPTS * (k + elapsed / cap)  # README: R × (k + T / MAX), R = 4 here
    requests = len(llm.requests)
    assert requests <= bound, (requests, bound, triggers)
    assert requests >= ATTEMPTS  # the outage was tried, not skipped
    assert not MentalModel.objects.get(uid=model.uid).paused
    assert MentalModel.objects.get(uid=model.uid).refresh_failure_streak >= 2
