"""Celery task events are on (what Flower and ``celery events`` read): the publisher sends
``task-sent`` and a worker started without ``-E`` sends ``task-received`` … ``task-succeeded``
for the ``operations.run`` task. (Worker heartbeats, Flower's "online", are Celery's default; the
test workers run ``--without-heartbeat``, so they are not asserted here.)"""

from __future__ import annotations

import threading

import pytest

from hindsight.project.celery import app
from operations.models import Operation
from tests.operations.helpers import submit_job
from tests.workers import wait_until

pytestmark = pytest.mark.integration


def test_settings_turn_task_events_on() -> None:
    assert app.conf.worker_send_task_events is True
    assert app.conf.task_send_sent_event is True


def test_a_worker_without_dash_e_sends_the_events_flower_shows(worker_factory) -> None:
    events: list[dict] = []
    receivers: list = []
    ready = threading.Event()

    def listen() -> None:
        with app.connection_for_read() as connection:
            receiver = app.events.Receiver(connection, handlers={"*": events.append})
            receivers.append(receiver)
            ready.set()
            receiver.capture(limit=None, timeout=None, wakeup=False)

    listener = threading.Thread(target=listen, daemon=True)
    listener.start()
    assert ready.wait(10)
    # The receiver's queue is bound only once capture() consumes: an event of our own, sent
    # until it comes back, says it does (a task-sent sent before would be lost).
    with app.events.default_dispatcher() as dispatcher:
        def probe_came_back() -> bool:
            dispatcher.send("test-probe")
            return any(e.get("type") == "test-probe" for e in events)

        wait_until(probe_came_back, 15, interval=0.2, message="the event receiver listening")
    # The worker factory starts ``celery worker`` without -E: the setting alone must do it.
    worker = worker_factory()
    assert "-E" not in worker.process.args
    try:
        op = submit_job()
        wait_until(lambda: Operation.objects.get(id=op.id).status == "completed", 30,
                   message="the job")

        def of_task(kind: str) -> list[dict]:
            return [e for e in events if e.get("type") == kind and e.get("uuid")]

        wait_until(lambda: of_task("task-succeeded"), 15, message="a task-succeeded event")
        sent = of_task("task-sent")
        assert any(e.get("name") == "operations.run" for e in sent)
        task_id = next(e["uuid"] for e in sent if e.get("name") == "operations.run")
        kinds = {e["type"] for e in events if e.get("uuid") == task_id}
        assert {"task-sent", "task-received", "task-started", "task-succeeded"} <= kinds
    finally:
        for receiver in receivers:
            receiver.should_stop = True
        listener.join(timeout=10)
