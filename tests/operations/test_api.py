"""Operations API (docs/behaviour.md#the-operations-api): upstream's wire shapes, filters, paging, and every refusal a 4xx."""

from __future__ import annotations

import uuid

import pytest
from rest_framework.test import APIClient

from hindsight.banks.models import Bank
from operations.models import CANCELLED, COMPLETED, FAILED, PENDING, Operation
from tests.factories import make_bank, make_operation

pytestmark = pytest.mark.django_db

BASE = "/v1/default/banks"

LIST_ITEM_KEYS = [
    "id", "task_type", "operation_id", "operation_type", "items_count", "document_id",
    "filename", "mental_model_id", "details", "created_at", "updated_at", "status",
    "error_message", "retry_count", "next_retry_at", "progress",
]
STATUS_KEYS = [
    "operation_id", "status", "operation_type", "id", "task_type", "mental_model_id",
    "created_at", "updated_at", "completed_at", "error_message", "retry_count",
    "next_retry_at", "progress", "result_metadata", "details", "child_operations",
    "task_payload",
]


@pytest.fixture
def api() -> APIClient:
    return APIClient()


@pytest.fixture
def bank_id() -> str:
    return "b1"


@pytest.fixture
def bank(bank) -> Bank:  # the shared bank, and another one beside it
    make_bank("other")
    return bank


def _op(**kwargs) -> Operation:
    return make_operation(**{"bank_id": "b1", **kwargs})


def test_list_returns_upstream_shape_newest_first_with_int_items_count(api, bank) -> None:
    retain = _op(operation_type="retain",
                 payload={"items": [{"content": "a", "document_id": "d1"},
                                    {"content": "b", "document_id": "d1"}]})
    refresh = _op(mental_model_id="m1", status=COMPLETED,
                  details={"operation_type": "refresh_mental_model",
                           "outcome": "content_written", "failure_reason": None})
    _op(bank_id="other")
    body = api.get(f"{BASE}/b1/operations").json()
    assert list(body) == ["bank_id", "total", "limit", "offset", "operations"]
    assert body["bank_id"] == "b1" and body["total"] == 2 and body["limit"] == 20
    assert [o["id"] for o in body["operations"]] == [str(refresh.id), str(retain.id)]
    first, second = body["operations"]
    assert list(first) == LIST_ITEM_KEYS
    assert first["details"] == {"operation_type": "refresh_mental_model",
                                "outcome": "content_written", "failure_reason": None}
    assert first["items_count"] == 0 and first["mental_model_id"] == "m1"
    assert second["items_count"] == 2 and second["document_id"] == "d1"
    assert second["details"] is None  # non-refresh operations carry no details
    assert first["created_at"].endswith("+00:00")


def test_list_filters_by_status_and_type_and_pages(api, bank) -> None:
    for i in range(5):
        _op(status=COMPLETED if i % 2 else PENDING, operation_type="retain" if i < 2 else
            "refresh_mental_model", dedupe_key=f"k{i}")
    assert api.get(f"{BASE}/b1/operations?status=pending").json()["total"] == 3
    assert api.get(f"{BASE}/b1/operations?type=retain").json()["total"] == 2
    page = api.get(f"{BASE}/b1/operations?limit=2&offset=4").json()
    assert page["total"] == 5 and len(page["operations"]) == 1 and page["offset"] == 4


@pytest.mark.parametrize("query,field", [
    ("status=bogus", "status"), ("limit=0", "limit"), ("limit=101", "limit"),
    ("limit=x", "limit"), ("offset=-1", "offset"),
])
def test_list_rejects_bad_query_parameters_with_422_naming_them(api, bank, query, field) -> None:
    response = api.get(f"{BASE}/b1/operations?{query}")
    assert response.status_code == 422
    assert response.json()["detail"][0]["loc"] == ["query", field]


def test_list_of_an_unknown_bank_is_404(api, db) -> None:
    response = api.get(f"{BASE}/nope/operations")
    assert response.status_code == 404 and response.json() == {"detail": "Bank 'nope' not found"}


def test_get_returns_the_status_shape(api, bank) -> None:
    op = _op(mental_model_id="m1", result_metadata={"name": "n", "mental_model_id": "m1"},
             payload={"mode": "full"})
    body = api.get(f"{BASE}/b1/operations/{op.id}").json()
    assert list(body) == STATUS_KEYS
    assert body["status"] == PENDING and body["operation_id"] == body["id"] == str(op.id)
    assert body["result_metadata"] == {"name": "n", "mental_model_id": "m1"}
    assert body["details"] is None and body["task_payload"] is None
    with_payload = api.get(f"{BASE}/b1/operations/{op.id}?include_payload=true").json()
    assert with_payload["task_payload"] == {"mode": "full"}


def test_get_unknown_or_another_banks_operation_is_200_not_found(api, bank) -> None:
    theirs = _op(bank_id="other")
    for op_id in (str(uuid.uuid4()), str(theirs.id)):
        response = api.get(f"{BASE}/b1/operations/{op_id}")
        assert response.status_code == 200
        body = response.json()
        assert body["status"] == "not_found" and body["operation_id"] == op_id
        assert all(body[k] is None for k in STATUS_KEYS if k not in ("status", "operation_id"))


@pytest.mark.parametrize("method,suffix", [
    ("get", ""), ("delete", ""), ("post", "/retry"), ("delete", "/delete"),
])
def test_malformed_operation_id_is_400(api, bank, method, suffix) -> None:
    response = getattr(api, method)(f"{BASE}/b1/operations/not-a-uuid{suffix}")
    assert response.status_code == 400
    assert response.json() == {"detail": "Invalid operation_id format: not-a-uuid"}


def test_cancel_pending_and_409_otherwise(api, bank) -> None:
    op = _op()
    response = api.delete(f"{BASE}/b1/operations/{op.id}")
    assert response.status_code == 200
    assert response.json() == {"success": True, "message": f"Operation {op.id} cancelled",
                               "operation_id": str(op.id)}
    assert Operation.objects.get(id=op.id).status == CANCELLED
    again = api.delete(f"{BASE}/b1/operations/{op.id}")
    assert again.status_code == 409 and "cancelled" in again.json()["detail"]


def test_cancel_of_another_banks_operation_is_404_and_changes_nothing(api, bank) -> None:
    theirs = _op(bank_id="other")
    assert api.delete(f"{BASE}/b1/operations/{theirs.id}").status_code == 404
    assert Operation.objects.get(id=theirs.id).status == PENDING


def test_retry_failed_or_cancelled_and_409_otherwise(api, bank) -> None:
    failed = _op(status=FAILED, retry_count=3, error_message="boom")
    response = api.post(f"{BASE}/b1/operations/{failed.id}/retry")
    assert response.status_code == 200 and response.json()["success"] is True
    again = Operation.objects.get(id=failed.id)
    assert again.status == PENDING and again.retry_count == 0 and again.error_message is None
    done = _op(status=COMPLETED, dedupe_key="x")
    assert api.post(f"{BASE}/b1/operations/{done.id}/retry").status_code == 409
    assert api.post(f"{BASE}/b1/operations/{uuid.uuid4()}/retry").status_code == 404


def test_delete_removes_finished_rows_and_409_for_pending(api, bank) -> None:
    pending = _op()
    assert api.delete(f"{BASE}/b1/operations/{pending.id}/delete").status_code == 409
    done = _op(status=COMPLETED, dedupe_key="y")
    response = api.delete(f"{BASE}/b1/operations/{done.id}/delete")
    assert response.status_code == 200 and response.json()["success"] is True
    assert not Operation.objects.filter(id=done.id).exists()
    assert api.get(f"{BASE}/b1/operations/{done.id}").json()["status"] == "not_found"


def test_details_without_a_known_outcome_are_hidden_from_the_wire(api, bank) -> None:
    op = _op(details={"operation_type": "refresh_mental_model"})
    assert api.get(f"{BASE}/b1/operations/{op.id}").json()["details"] is None


def test_beat_schedules_exist_after_migrate(db) -> None:
    from django_celery_beat.models import PeriodicTask

    tasks = dict(PeriodicTask.objects.filter(name__startswith="operations.")
                 .values_list("name", "task"))
    assert tasks == {"operations.release_due": "operations.release_due",
                     "operations.recover": "operations.recover"}


def test_beat_schedules_are_created_idempotently(db) -> None:
    from django_celery_beat.models import PeriodicTask

    from operations.schedules import ensure_beat_schedules

    ensure_beat_schedules()
    ensure_beat_schedules()
    assert PeriodicTask.objects.filter(name__startswith="operations.").count() == 2


def test_operation_counts_cover_every_status(bank) -> None:
    from operations.selectors import operation_counts

    _op(status=FAILED)
    _op(status=COMPLETED)
    _op(status=COMPLETED, dedupe_key="z")
    assert operation_counts(bank_id="b1") == {
        "pending": 0, "processing": 0, "completed": 2, "failed": 1, "cancelled": 0}


def test_admin_lists_operations_filtered_by_status_and_cancels_through_the_service(
    bank, admin_client
) -> None:
    pending = _op(dedupe_key="adm1")
    done = _op(status=COMPLETED, dedupe_key="adm2")
    page = admin_client.get("/admin/operations/operation/?status__exact=pending")
    assert page.status_code == 200
    assert str(pending.id) in page.content.decode() and str(done.id) not in page.content.decode()
    response = admin_client.post("/admin/operations/operation/", {
        "action": "cancel_pending", "_selected_action": [str(pending.id), str(done.id)]})
    assert response.status_code == 302
    assert Operation.objects.get(id=pending.id).status == CANCELLED
    assert Operation.objects.get(id=done.id).status == COMPLETED  # refused, unchanged
