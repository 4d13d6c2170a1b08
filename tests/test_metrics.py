"""``/metrics`` against real workers: refreshes (one failing), a parked refresh released and run,
lock contention between two worker processes, a recovered operation, LLM requests and tokens by
bank and purpose, and the queue gauges read from the database at scrape time.

The session's metric files are shared by every test (multiprocess mode), so counters that other
tests also move are asserted as differences between two scrapes; series labelled with this
test's own bank are asserted as absolute values.
"""

from __future__ import annotations

import dataclasses
import threading
from datetime import UTC, datetime

import pytest
from django.test import Client
from prometheus_client.parser import text_string_to_metric_families

from fakes.llm_server import Reply
from hindsight.banks.models import Bank
from mentalmodels.models import MentalModel
from mentalmodels.services import mental_model_refresh_request, refresh_dedupe_key
from mentalmodels.triggers import trigger_normalize
from mentalmodels.triggers_auto import PARKED, mental_model_refresh_auto
from operations.models import PENDING, Operation
from tests.factories import make_memory
from tests.workers import run_beat_once, wait_until

pytestmark = pytest.mark.integration

BANK = "metrics-bank"
USAGE = {"prompt_tokens": 100, "completion_tokens": 7}
FAIL = "FAIL THIS MODEL"

Samples = dict[tuple[str, frozenset], float]


def scrape() -> Samples:
    response = Client().get("/metrics")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/plain")
    samples: Samples = {}
    for family in text_string_to_metric_families(response.content.decode()):
        for sample in family.samples:
            samples[(sample.name, frozenset(sample.labels.items()))] = sample.value
    return samples


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, frozenset(labels.items())), 0.0)


def total(samples: Samples, name: str, **labels: str) -> float:
    """Sum over every series of ``name`` whose labels include ``labels``."""
    want = set(labels.items())
    return sum(v for (n, ls), v in samples.items() if n == name and want <= ls)


def label_values(samples: Samples, name: str, label: str, **labels: str) -> set[str]:
    want = set(labels.items())
    return {dict(ls)[label] for (n, ls), _ in samples.items() if n == name and want <= ls}


def responder(server, memory_id: str, errors: list[int]):
    """Answers every reflect call at once citing the memory (a new answer each time); a model
    whose source query says FAIL gets an error (400: not retried by the gateway)."""
    lock = threading.Lock()
    answers = iter(range(1, 1000))

    def respond(body: dict) -> Reply:
        # The question is the first user message (tool results may name other models).
        question = next((str(m.get("content") or "") for m in body.get("messages", [])
                         if m.get("role") == "user"), "")
        if FAIL in question:
            with lock:
                errors.append(1)
            return Reply.error(400, "scripted refusal")
        choice = body.get("tool_choice")
        if isinstance(choice, dict):
            return Reply.tool_calls([(choice["function"]["name"], {"query": "team"})], usage=USAGE)
        with lock:
            n = next(answers)
        return Reply.tool_calls([("done", {"answer": f"## Doc\n\nfact {n}",
                                           "memory_ids": [memory_id], "mental_model_ids": []})],
                                usage=USAGE)

    server.respond_with(respond)


def model(mental_model_id: str, source_query: str, **trigger) -> MentalModel:
    return MentalModel.objects.create(
        bank_id=BANK, mental_model_id=mental_model_id, name=mental_model_id,
        source_query=source_query, trigger=trigger_normalize(trigger),
    )


def finished(op_id) -> Operation | None:
    op = Operation.objects.get(id=op_id)
    return op if op.status in ("completed", "failed", "cancelled") else None


def test_metrics_count_refreshes_llm_use_contention_recovery_and_read_the_queue(
    transactional_db, scripted_llm, openai_embeddings, worker_factory, settings
):
    settings.HINDSIGHT = dataclasses.replace(settings.HINDSIGHT, worker_max_retries=0)
    Bank.objects.create(id=BANK)
    fact = make_memory(BANK, "Alice prefers async communication", embed=True)
    errors: list[int] = []
    responder(scripted_llm, str(fact.id), errors)
    good = model("good", "How does the team work?", min_refresh_interval_seconds=3600)
    model("bad", f"{FAIL}: how does the team work?")
    before = scrape()
    assert "hindsight_consolidation_runs_total" in {n for n, _ in before}  # defined, at 0 here
    worker_factory(env=scripted_llm.env, concurrency=2)

    # One refresh that writes, one that fails (no retries: one attempt).
    ok_op = mental_model_refresh_request(bank_id=BANK, mental_model_id="good")
    bad_op = mental_model_refresh_request(bank_id=BANK, mental_model_id="bad")
    done = wait_until(lambda: finished(ok_op.id), 60, message="good refresh")
    assert done.status == "completed", done.error_message
    assert wait_until(lambda: finished(bad_op.id), 60, message="bad refresh").status == "failed"

    # A parked refresh: an automatic trigger inside the model's rate floor (1 h).
    make_memory(BANK, "Bob joined the team", embed=True)
    good.refresh_from_db()
    parked = mental_model_refresh_auto(model=good, reason="test")
    assert parked.action == PARKED
    # A due pending operation nobody sent (a row, no message), created in 2000.
    waiting = Operation.objects.create(bank_id=BANK, operation_type="metrics.never_sent",
                                       created_at=datetime(2000, 1, 1, tzinfo=UTC))

    queued = scrape()
    assert value(queued, "hindsight_operations_parked", operation_type="refresh_mental_model") == 1
    assert value(queued, "hindsight_operations_queue_depth", status="pending",
                 operation_type="refresh_mental_model") == 1
    assert value(queued, "hindsight_operations_queue_depth", status="pending",
                 operation_type="metrics.never_sent") == 1
    assert value(queued, "hindsight_operations_parked", operation_type="metrics.never_sent") == 0
    # The parked one is not waiting for a worker; the unsent one has since 2000.
    assert value(queued, "hindsight_operations_oldest_pending_age_seconds") > 20 * 365 * 86400
    Operation.objects.filter(id=waiting.id).delete()

    # Released by a manual refresh (the admin's and the API's action) and run by the worker,
    # while a second request arrives during it: the second worker process finds the key locked.
    hold_reply, hold = Reply.hold(Reply.tool_calls([("search_observations", {"query": "team"})],
                                                   usage=USAGE))
    scripted_llm.script(hold_reply)
    released = mental_model_refresh_request(bank_id=BANK, mental_model_id="good")
    assert released.id == parked.operation.id  # the parked operation itself runs now
    assert hold.wait_received(30)
    follower = mental_model_refresh_request(bank_id=BANK, mental_model_id="good")
    assert follower.id != released.id
    key = refresh_dedupe_key(bank_id=BANK, mental_model_id="good")
    contention_before = value(before, "hindsight_operation_lock_contention_total",
                              operation_type="refresh_mental_model")
    wait_until(lambda: value(scrape(), "hindsight_operation_lock_contention_total",
                             operation_type="refresh_mental_model") > contention_before,
               30, message="the second worker process to meet the held lock")
    assert Operation.objects.get(id=follower.id).status == PENDING
    hold.release()
    assert wait_until(lambda: finished(released.id), 60, message="released").status == "completed"
    assert wait_until(lambda: finished(follower.id), 60, message="follower").status == "completed"
    assert not Operation.objects.filter(dedupe_key=key, status=PENDING).exists()

    # A running operation whose worker went silent, taken back by the recovery sweep.
    old = datetime(2000, 1, 1, tzinfo=UTC)
    silent = Operation.objects.create(bank_id=BANK, operation_type="metrics.silent",
                                      status="processing", fence=1, heartbeat_at=old)
    _, report = run_beat_once()
    assert [r.operation.id for r in report.recovered] == [silent.id]
    Operation.objects.filter(id=silent.id).delete()

    after = scrape()

    def delta(name: str, **labels: str) -> float:
        return value(after, name, **labels) - value(before, name, **labels)

    # Refreshes by outcome, and their duration by outcome and mode.
    assert delta("hindsight_refreshes_total", outcome="content_written") == 3
    assert delta("hindsight_refreshes_total", outcome="refresh_failed_error") == 1
    assert delta("hindsight_refresh_duration_seconds_count", outcome="content_written",
                 mode="full") == 3
    assert delta("hindsight_refresh_duration_seconds_count", outcome="refresh_failed_error",
                 mode="full") == 1
    assert delta("hindsight_refresh_duration_seconds_sum", outcome="content_written",
                 mode="full") > 0
    assert delta("hindsight_refresh_duration_seconds_bucket", outcome="content_written",
                 mode="full", le="+Inf") == 3
    # No consolidation runs in this test (its rows are made directly): the series exists at 0.
    assert delta("hindsight_consolidation_runs_total", outcome="completed") == 0
    assert ("hindsight_consolidation_runs_total", frozenset({("outcome", "completed")})) in after
    # Lock contention: the follower's first message met the held lock (at least once).
    assert delta("hindsight_operation_lock_contention_total",
                 operation_type="refresh_mental_model") >= 1
    assert delta("hindsight_operations_recovered_total", operation_type="metrics.silent") == 1

    # LLM use of this bank: every request the scripted server answered, by purpose and status.
    ok = len(scripted_llm.requests) - len(errors)
    assert ok >= 3
    assert total(after, "hindsight_llm_requests_total", bank=BANK, status="ok") == ok
    assert total(after, "hindsight_llm_requests_total", bank=BANK, status="error") == len(errors) == 1
    assert label_values(after, "hindsight_llm_requests_total", "purpose", bank=BANK) <= {
        "reflect:agent", "reflect:final"}
    assert total(after, "hindsight_llm_input_tokens_total", bank=BANK) == 100 * ok
    assert total(after, "hindsight_llm_output_tokens_total", bank=BANK) == 7 * ok

    # The queue is empty again.
    assert value(after, "hindsight_operations_parked", operation_type="refresh_mental_model") == 0
    assert value(after, "hindsight_operations_queue_depth", status="pending",
                 operation_type="refresh_mental_model") == 0
    assert value(after, "hindsight_operations_queue_depth", status="processing",
                 operation_type="refresh_mental_model") == 0
    # No model id or operation id ever becomes a label.
    for _, labels in after:
        words = {k for k, _ in labels} | {v for _, v in labels}
        assert not {"good", "bad", "mental_model_id", "operation_id", "scripted"} & words
