"""``operations.dispatch``: publishing an operation's id (stamped ``dispatched_at``, a short
retry, never raising) and publishing once the transaction commits."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from operations import dispatch
from operations.models import PROCESSING, Operation
from operations.queue import operation_submit
from operations.tasks import run_operation
from tests.factories import make_operation

pytestmark = pytest.mark.django_db


@pytest.fixture
def bank_id() -> str:
    return "b1"


@pytest.fixture
def published(monkeypatch) -> list[dict[str, Any]]:
    """What ``run_operation.apply_async`` was called with (nothing reaches the broker)."""
    calls: list[dict[str, Any]] = []
    monkeypatch.setattr(run_operation, "apply_async", lambda *a, **k: calls.append(k))
    return calls


def test_failed_publish_leaves_dispatched_at_null_for_recovery_and_never_raises(
    bank, monkeypatch
) -> None:
    from operations import dispatch
    from operations.tasks import run_operation

    op = Operation.objects.create(bank=bank, operation_type="x", dedupe_key="pub")

    def broker_down(*args, **kwargs):
        raise ConnectionError("broker down")

    monkeypatch.setattr(run_operation, "apply_async", broker_down)
    assert dispatch.operation_send(operation_id=op.id) is False
    assert Operation.objects.get(id=op.id).dispatched_at is None

    published = []
    monkeypatch.setattr(run_operation, "apply_async",
                        lambda *a, **k: published.append(k["args"]))
    assert dispatch.operation_send(operation_id=op.id) is True
    assert published == [[str(op.id)]]
    assert Operation.objects.get(id=op.id).dispatched_at is not None


def test_submit_publishes_only_after_commit(bank, django_capture_on_commit_callbacks,
                                            monkeypatch) -> None:
    published = []
    monkeypatch.setattr("operations.dispatch.operation_send",
                        lambda *, operation_id, operation_type=None: published.append(operation_id))
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        op = operation_submit(bank_id="b1", operation_type="x", dedupe_key="oc").operation
        assert published == []  # nothing leaves before the transaction commits
    assert len(callbacks) == 1 and published == [op.id]


def test_send_publishes_the_id_on_the_configured_queue_with_the_configured_retries(
    bank, published, settings
) -> None:
    settings.HINDSIGHT = dataclasses.replace(settings.HINDSIGHT, task_queue="q-test",
                                             publish_retries=2)
    op = make_operation(bank_id="b1", dedupe_key="pub")
    assert dispatch.operation_send(operation_id=op.id) is True
    [call] = published
    assert call["args"] == [str(op.id)] and call["queue"] == "q-test"
    assert call["retry"] is True and call["retry_policy"]["max_retries"] == 2


def test_send_without_publish_retries_does_not_retry(bank, published, settings) -> None:
    settings.HINDSIGHT = dataclasses.replace(settings.HINDSIGHT, publish_retries=0)
    op = make_operation(bank_id="b1")
    assert dispatch.operation_send(operation_id=op.id) is True
    assert published[0]["retry"] is False


def test_send_stamps_only_a_pending_operation(bank, published) -> None:
    op = make_operation(bank_id="b1", status=PROCESSING)
    assert dispatch.operation_send(operation_id=op.id) is True
    assert len(published) == 1
    assert Operation.objects.get(id=op.id).dispatched_at is None


def test_send_of_an_unparseable_id_still_never_raises(published) -> None:
    assert dispatch.operation_send(operation_id="not-a-uuid") is True
    assert published[0]["args"] == ["not-a-uuid"]


def test_send_on_commit_publishes_nothing_when_the_transaction_rolls_back(
    bank, published, django_capture_on_commit_callbacks
) -> None:
    from django.db import transaction

    class Rollback(Exception):
        pass

    with (django_capture_on_commit_callbacks(execute=True) as callbacks,
          pytest.raises(Rollback), transaction.atomic()):
        operation_submit(bank_id="b1", operation_type="x", dedupe_key="rb")
        raise Rollback
    assert callbacks == [] and published == []


@pytest.mark.django_db(transaction=True)
def test_outside_a_transaction_the_stamp_commits_without_waiting_for_its_wal_flush(
    bank, published
) -> None:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from tests.durability import synchronous_commit

    op = make_operation(bank_id="b1", dedupe_key="async-stamp")
    assert synchronous_commit("on") == "on"
    with CaptureQueriesContext(connection) as captured:
        assert dispatch.operation_send(operation_id=op.id) is True
    [stamp] = [q["sql"] for q in captured.captured_queries if "dispatched_at" in q["sql"]]
    assert stamp.endswith("; SET LOCAL synchronous_commit = off")
    assert Operation.objects.get(id=op.id).dispatched_at is not None
    assert synchronous_commit() == "on"  # only the stamp's own implicit transaction


def test_cpu_heavy_operations_go_to_the_cpu_queue_when_one_is_set_and_the_rest_stay(
    bank, published, settings
) -> None:
    from hindsight.banks.handlers import ConsolidationHandler, RetainHandler

    assert RetainHandler.cpu_heavy and ConsolidationHandler.cpu_heavy
    retain = make_operation(bank_id="b1", operation_type="retain")
    consolidation = make_operation(bank_id="b1", operation_type="consolidation",
                                   dedupe_key="consolidation:b1")
    refresh = make_operation(bank_id="b1", operation_type="refresh_mental_model",
                             dedupe_key="mm:b1:m")
    settings.HINDSIGHT = dataclasses.replace(settings.HINDSIGHT, task_queue="q-main")
    for op in (retain, consolidation, refresh):  # no CPU queue: one queue for everything
        dispatch.operation_send(operation_id=op.id)
    settings.HINDSIGHT = dataclasses.replace(settings.HINDSIGHT, cpu_queue="q-cpu")
    for op in (retain, consolidation, refresh):  # the type read from the row
        dispatch.operation_send(operation_id=op.id)
    dispatch.operation_send(operation_id=refresh.id, operation_type="retain")  # or given
    assert [c["queue"] for c in published] == [
        "q-main", "q-main", "q-main", "q-cpu", "q-cpu", "q-main", "q-cpu"]


def test_a_submit_hands_its_type_to_the_publish_which_need_not_read_it_back(
    bank, settings, django_capture_on_commit_callbacks, monkeypatch
) -> None:
    routed: list[tuple[Any, Any]] = []
    monkeypatch.setattr("operations.dispatch.operation_send", lambda *, operation_id,
                        operation_type=None: routed.append((operation_id, operation_type)))
    settings.HINDSIGHT = dataclasses.replace(settings.HINDSIGHT, cpu_queue="q-cpu")
    with django_capture_on_commit_callbacks(execute=True):
        op = operation_submit(bank_id="b1", operation_type="retain").operation
    assert routed == [(op.id, "retain")]
