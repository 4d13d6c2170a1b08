"""Deleting a bank while a job of that bank runs in a real worker: the bank delete answers at
once (no deadlock, no 500), the held job ends without writing anything (no resurrected bank,
memories or model, no retries), and the worker lives on to run the next job."""

from __future__ import annotations

import threading

import pytest
from django.db import connection
from rest_framework.test import APIClient

from fakes.llm_server import Reply
from hindsight.banks.models import Bank, MemoryUnit
from hindsight.banks.services import bank_delete
from mentalmodels.models import MentalModel
from operations.jobs import Job
from operations.leases import operation_claim
from operations.models import Operation
from operations.queue import operation_submit
from tests.factories import make_memory, make_mental_model
from tests.mentalmodels.test_refresh_worker import answering, hold_first_request
from tests.operations.test_lock_order import WAIT, Contender, _join, _no_errors, _settle
from tests.workers import wait_until

pytestmark = pytest.mark.integration

DOOMED = "doomed-bank"
NEXT = "next-bank"


def _next_job_completes(api: APIClient) -> None:
    """A verbatim async retain of another bank: with one worker slot, its completion means the
    held job has ended and the worker is still serving."""
    response = api.post(f"/v1/default/banks/{NEXT}/memories", {
        "items": [{"content": "after the delete", "strategy": "verbatim"}], "async": True,
    }, format="json")
    assert response.status_code == 200, response.content
    op_id = response.json()["operation_id"]
    wait_until(lambda: Operation.objects.get(id=op_id).status in {"completed", "failed"}, 60,
               message="the next job ends")
    assert Operation.objects.get(id=op_id).status == "completed"


def _nothing_of_the_bank_left() -> None:
    assert not Bank.objects.filter(id=DOOMED).exists()
    assert not MemoryUnit.objects.filter(bank_id=DOOMED).exists()
    assert not MentalModel.objects.filter(bank_id=DOOMED).exists()
    assert not Operation.objects.filter(bank_id=DOOMED).exists()


def test_bank_delete_during_a_held_refresh_writes_nothing_and_the_worker_lives_on(
    llm, worker_factory
):
    bank = Bank.objects.create(id=DOOMED)
    fact = make_memory(bank, "fact", embed=True)
    make_mental_model(bank, "team")
    handle = hold_first_request(llm)
    answering(llm, ["never stored"], [str(fact.id)])
    worker = worker_factory(env=llm.env)
    api = APIClient()
    refresh = api.post(f"/v1/default/banks/{DOOMED}/mental-models/team/refresh", format="json")
    assert refresh.status_code == 200, refresh.content
    assert handle.wait_received(20)
    deleted = api.delete(f"/v1/default/banks/{DOOMED}")
    assert deleted.status_code == 200, deleted.content
    handle.release()
    _next_job_completes(api)
    _nothing_of_the_bank_left()
    assert worker.alive()
    assert "Traceback" not in worker.log()


def test_bank_delete_during_a_held_async_retain_writes_nothing_and_the_worker_lives_on(
    llm, worker_factory
):
    Bank.objects.create(id=DOOMED)
    reply, handle = Reply.hold(Reply.json({"facts": [
        {"text": "Alice likes tea.", "fact_type": "world",
         "occurred_start": None, "occurred_end": None}]}))
    llm.script(reply)
    worker = worker_factory(env=llm.env)
    api = APIClient()
    retain = api.post(f"/v1/default/banks/{DOOMED}/memories", {
        "items": [{"content": "Alice likes tea."}], "async": True}, format="json")
    assert retain.status_code == 200, retain.content
    assert handle.wait_received(20)
    deleted = api.delete(f"/v1/default/banks/{DOOMED}")
    assert deleted.status_code == 200, deleted.content
    handle.release()
    _next_job_completes(api)
    _nothing_of_the_bank_left()
    assert worker.alive()
    assert "Traceback" not in worker.log()


class _RefreshWriting(threading.Thread):
    """A refresh inside its fenced write (lease row → model row), held before it completes its
    operation row: where a bank delete that locks the other way round would close a cycle."""

    def __init__(self, op: Operation, model_uid):
        super().__init__(name="refresh-write", daemon=True)
        self.job = Job(op, fence=op.fence, key=op.lease_key)
        self.model_uid = model_uid
        self.inside = threading.Event()
        self.go = threading.Event()
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            with self.job.finishing():
                model = MentalModel.objects.select_for_update().get(uid=self.model_uid)
                MentalModel.objects.filter(uid=model.uid).update(content="written by the job")
                self.inside.set()
                assert self.go.wait(WAIT)
        except BaseException as exc:  # noqa: BLE001 - the test reports it
            self.error = exc
        finally:
            self.inside.set()
            connection.close()


@pytest.mark.django_db(transaction=True)
def test_bank_delete_meeting_a_refresh_mid_write_queues_behind_it_instead_of_deadlocking(
    sent,
) -> None:
    Bank.objects.create(id=DOOMED)
    model = make_mental_model(DOOMED, "team")
    op = operation_submit(bank_id=DOOMED, operation_type="x",
                          dedupe_key=f"mm:{DOOMED}:team").operation
    claimed = operation_claim(operation_id=op.id, holder="w")
    assert isinstance(claimed, Operation)
    writing = _RefreshWriting(claimed, model.uid)
    writing.start()
    assert writing.inside.wait(WAIT)
    delete = Contender("bank-delete", lambda: bank_delete(bank_id=DOOMED))
    delete.start()
    _settle([delete])
    writing.go.set()
    _join(writing, delete)
    _no_errors(delete)
    # The job held its lease row since its fence check, so the delete's fence bump queued
    # behind it: the job committed whole, and the delete then removed it all.
    assert writing.error is None, repr(writing.error)
    _nothing_of_the_bank_left()
