"""The admin for operations and leases: read-only, parked operations shown as such, cancel and
retry through the services, leases never deletable."""

from __future__ import annotations

import pytest
from django.test import Client

from hindsight.banks.models import Bank
from operations.models import CANCELLED, FAILED, PENDING, Lease, Operation
from operations.queue import operation_submit

pytestmark = pytest.mark.django_db

LIST = "/admin/operations/operation/"


@pytest.fixture
def sent(monkeypatch) -> list:
    published: list = []
    monkeypatch.setattr("operations.dispatch.operation_send_on_commit",
                        lambda **kw: published.append(kw["operation_id"]) or True)
    return published


def parked_op(bank: Bank) -> Operation:
    return Operation.objects.create(bank=bank, operation_type="refresh_mental_model",
                                    dedupe_key="mm:b:m", mental_model_id="m", automatic=True,
                                    next_retry_at="2999-01-01T00:00:00Z")


def test_list_marks_parked_operations_and_filters_them(admin_client: Client, sent) -> None:
    bank = Bank.objects.create(id="b")
    parked = parked_op(bank)
    due = operation_submit(bank_id="b", operation_type="retain").operation
    body = admin_client.get(LIST).content.decode()
    assert 'class="op-parked"' in body and "2999-01-01 00:00:00" in body
    response = admin_client.get(LIST + "?parked=yes")
    assert [op.id for op in response.context["cl"].result_list] == [parked.id]
    response = admin_client.get(LIST + "?operation_type=retain")
    assert [op.id for op in response.context["cl"].result_list] == [due.id]


def test_cancel_action_cancels_a_parked_operation_through_the_service(admin_client: Client, sent) -> None:
    op = parked_op(Bank.objects.create(id="b"))
    admin_client.post(LIST, {"action": "cancel_pending", "_selected_action": [op.id]})
    op.refresh_from_db()
    assert op.status == CANCELLED and op.error_message == "cancelled by request"


def test_cancel_of_a_finished_operation_is_refused_and_reported(admin_client: Client, sent) -> None:
    op = Operation.objects.create(bank=Bank.objects.create(id="b"), operation_type="retain",
                                  status=FAILED)
    response = admin_client.post(LIST, {"action": "cancel_pending", "_selected_action": [op.id]},
                                 follow=True)
    assert "only a pending operation can be cancelled" in response.content.decode()
    op.refresh_from_db()
    assert op.status == FAILED


def test_retry_action_requeues_a_failed_operation_and_sends_it(admin_client: Client, sent) -> None:
    op = Operation.objects.create(bank=Bank.objects.create(id="b"), operation_type="retain",
                                  status=FAILED, retry_count=3, error_message="boom")
    admin_client.post(LIST, {"action": "retry_failed_or_cancelled", "_selected_action": [op.id]})
    op.refresh_from_db()
    assert op.status == PENDING and op.retry_count == 0 and op.id in sent


def test_operations_cannot_be_added_edited_or_deleted(admin_client: Client) -> None:
    op = Operation.objects.create(bank=Bank.objects.create(id="b"), operation_type="retain")
    assert admin_client.get(LIST + "add/").status_code == 403
    assert admin_client.post(f"{LIST}{op.id}/change/", {"status": "completed"}).status_code == 403
    assert admin_client.post(f"{LIST}{op.id}/delete/", {"post": "yes"}).status_code == 403
    op.refresh_from_db()
    assert op.status == PENDING


def test_leases_are_read_only_and_cannot_be_deleted(admin_client: Client) -> None:
    Lease.objects.create(key="mm:b:m", fence=7)
    assert admin_client.get("/admin/operations/lease/").status_code == 200
    assert admin_client.post("/admin/operations/lease/mm:b:m/delete/", {"post": "yes"}).status_code == 403
    response = admin_client.post("/admin/operations/lease/", {
        "action": "delete_selected", "_selected_action": ["mm:b:m"], "post": "yes"})
    assert response.status_code in (200, 302)
    assert Lease.objects.get(key="mm:b:m").fence == 7
