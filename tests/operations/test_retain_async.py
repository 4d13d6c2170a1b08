"""Async retain through the engine: the inserts and the operation's completion are one fenced
transaction, so a redelivered job inserts nothing twice and a superseded one inserts nothing."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from hindsight.banks.handlers import RetainHandler
from hindsight.banks.models import MemoryUnit
from operations.engine import operation_execute
from operations.errors import FenceLost
from operations.jobs import Job
from operations.leases import lease_bump, operation_claim
from operations.models import COMPLETED, FAILED, PENDING, Operation

pytestmark = pytest.mark.django_db


def _post_async(bank: str, *contents: str, **extra) -> str:
    response = APIClient().post(
        f"/v1/default/banks/{bank}/memories",
        {"items": [{"content": c} for c in contents], "async": True, **extra},
        format="json",
    )
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["async"] is True and body["operation_id"]
    return body["operation_id"]


def test_async_retain_queues_an_operation_and_inserts_nothing_yet(db) -> None:
    op_id = _post_async("r1", "Erin owns a red bicycle.", "Frank prefers tea.")
    op = Operation.objects.get(id=op_id)
    assert op.operation_type == "retain" and op.status == PENDING and op.dedupe_key is None
    assert [i["content"] for i in op.payload["items"]] == ["Erin owns a red bicycle.",
                                                           "Frank prefers tea."]
    assert MemoryUnit.objects.filter(bank_id="r1").count() == 0


def test_async_retain_runs_once_and_a_redelivered_message_inserts_nothing_twice(db) -> None:
    op_id = _post_async("r2", "Erin owns a red bicycle.", "Frank prefers tea.")
    assert operation_execute(operation_id=op_id, holder="t") == "completed"
    assert MemoryUnit.objects.filter(bank_id="r2").count() == 2
    done = Operation.objects.get(id=op_id)
    assert done.status == COMPLETED and done.result_metadata["items_count"] == 2
    assert operation_execute(operation_id=op_id, holder="t") == "skipped"  # redelivery
    assert MemoryUnit.objects.filter(bank_id="r2").count() == 2


def test_async_retain_whose_fence_was_taken_over_inserts_nothing(db) -> None:
    op_id = _post_async("r3", "Gina runs on Tuesdays.")
    op = operation_claim(operation_id=op_id, holder="old-worker")
    job = Job(op, fence=op.fence, key=op.lease_key)
    lease_bump(key=op.lease_key)  # a newer claim (recovery) took the operation over
    with pytest.raises(FenceLost):
        RetainHandler().run(job)
    assert MemoryUnit.objects.filter(bank_id="r3").count() == 0
    assert Operation.objects.get(id=op_id).status != COMPLETED


def test_same_client_operation_id_queues_one_retain(db) -> None:
    fixed = "5b0c1f0e-8f43-4b7e-9d55-3f6f3f0a1c11"
    first = _post_async("r4", "Hank fixes bikes.", operation_id=fixed)
    second = _post_async("r4", "Hank fixes bikes.", operation_id=fixed)
    assert first == second == fixed
    assert Operation.objects.filter(bank_id="r4").count() == 1


def test_async_retain_with_an_unreadable_payload_fails_at_once_without_retries(db) -> None:
    from hindsight.banks.models import Bank

    Bank.objects.create(id="r5")
    op = Operation.objects.create(bank_id="r5", operation_type="retain",
                                  payload={"items": [{"content": "x", "bogus": 1}]})
    assert operation_execute(operation_id=str(op.id), holder="t") == "failed"
    recorded = Operation.objects.get(id=op.id)
    assert recorded.status == FAILED and recorded.retry_count == 0
    assert "unreadable" in recorded.error_message
