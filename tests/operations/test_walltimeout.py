"""The wall-timeout mechanism in a pool thread (``operations.walltimeout``), in-process: the
timeout surfaces in the slot's thread, an LLM wait never outlives the slot's clock, and a slot
stuck in a call that never returns is given up (``on_stuck``) while it is still stuck."""

from __future__ import annotations

import threading
import time

import pytest
from django.db import connection

from fakes.llm_server import Reply
from hindsight.infra.llm import get_llm
from operations import walltimeout
from operations.errors import WallTimeout


def _in_a_thread(body) -> dict:
    """Run ``body`` in a fresh thread (a threads-pool slot); what it raised and how long."""
    outcome: dict = {}

    def run() -> None:
        started = time.monotonic()
        try:
            body()
        except BaseException as exc:  # noqa: BLE001 - the test reads it
            outcome["raised"] = exc
        outcome["seconds"] = time.monotonic() - started

    thread = threading.Thread(target=run)
    thread.start()
    thread.join(30)
    assert not thread.is_alive()
    return outcome


def test_a_slot_waiting_through_slot_wait_is_cut_at_its_clock() -> None:
    def body() -> None:
        with walltimeout.armed(0.3):
            walltimeout.slot_wait(10)

    outcome = _in_a_thread(body)
    assert isinstance(outcome["raised"], WallTimeout)
    assert "wall timeout of 0.3s exceeded" in str(outcome["raised"])
    assert outcome["seconds"] < 3


def test_python_code_of_a_slot_is_interrupted_and_a_disarmed_slot_never_is() -> None:
    def busy() -> None:
        with walltimeout.armed(0.3):
            while True:
                sum(range(1000))

    assert isinstance(_in_a_thread(busy)["raised"], WallTimeout)

    def disarmed() -> None:
        with walltimeout.armed(0.2) as alarm:
            alarm.disarm()  # what Job.finishing does
            deadline = time.monotonic() + 0.6
            while time.monotonic() < deadline:
                sum(range(1000))

    assert "raised" not in _in_a_thread(disarmed)


def test_an_llm_request_inside_a_slot_ends_with_the_slots_clock(scripted_llm, db) -> None:
    scripted_llm.script(Reply.delay(10.0, Reply.text("too late")))

    def body() -> None:
        with walltimeout.armed(0.5):
            get_llm().chat([{"role": "user", "content": "hello"}])

    outcome = _in_a_thread(body)
    # The watchdog and the capped request end together; either way it is the slot's timeout.
    assert isinstance(outcome["raised"], WallTimeout)
    assert outcome["seconds"] < 4  # not the request's own 120 s timeout, nor the 10 s answer


def test_a_slot_stuck_in_a_blocking_call_is_given_up_while_it_is_stuck(monkeypatch) -> None:
    monkeypatch.setattr(walltimeout, "grace_seconds", 0.3)
    given_up = threading.Event()
    still_stuck: list[bool] = []

    def body() -> None:
        with walltimeout.armed(0.2, on_stuck=given_up.set):
            time.sleep(2.0)  # a blocking C call: the timeout can only surface after it
            still_stuck.append(given_up.is_set())

    outcome = _in_a_thread(body)
    assert given_up.is_set()
    assert isinstance(outcome["raised"], WallTimeout)  # surfaced once the call returned
    assert still_stuck == []  # nothing after the blocking call ran


@pytest.fixture(autouse=True)
def _no_llm_retries(settings) -> None:
    import dataclasses

    settings.HINDSIGHT = dataclasses.replace(settings.HINDSIGHT, llm_max_retries=0)


def _slot_timed_out_in_queries(seconds: float) -> BaseException | None:
    """Queries back to back in an armed slot until its clock runs out, then one more query on
    the same connection: what the slot raised, after checking that the connection still works
    (the failure write of a timed-out attempt uses it)."""
    raised: BaseException | None = None
    try:
        with walltimeout.armed(seconds), connection.cursor() as cursor:  # autocommit
            while True:
                cursor.execute("SELECT 1")
                cursor.fetchone()
    except BaseException as exc:  # noqa: BLE001 - the test reads it
        raised = exc
    with connection.cursor() as cursor:
        cursor.execute("SELECT 2")
        assert cursor.fetchone() == (2,)
    return raised


@pytest.mark.parametrize("thread", ["pool thread", "main thread"])
def test_a_timeout_while_the_slot_queries_never_leaves_its_connection_mid_command(
    thread: str, transactional_db
) -> None:
    # Before the shield, the timeout could land between psycopg's send and its read: the next
    # query on that connection failed with "another command is already in progress".
    for _ in range(6):
        if thread == "main thread":  # a prefork child's slot: the SIGALRM path
            raised = _slot_timed_out_in_queries(0.15)
        else:
            outcome = _in_a_thread(lambda: _slot_timed_out_in_queries(0.15))
            assert "raised" not in outcome, outcome  # the check inside ran and passed
            raised = None  # what the slot raised is checked in the main-thread case
        assert raised is None or isinstance(raised, WallTimeout), repr(raised)


def test_a_slow_query_at_the_slots_clock_is_cancelled_and_raises_the_timeout(transactional_db):
    started = time.monotonic()
    with pytest.raises(WallTimeout), walltimeout.armed(0.3), connection.cursor() as cursor:
        cursor.execute("SELECT pg_sleep(5)")
    assert time.monotonic() - started < 3  # cancelled at the clock, not after the 5 s sleep
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
        assert cursor.fetchone() == (1,)
