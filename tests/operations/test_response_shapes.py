"""Each operations response serializer is the one owner of its shape: what ``render`` builds is
what the serializer declares (and so what the OpenAPI document says), key for key and in order,
for every variant of the answer."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

import pytest

from operations.api.serializers import (
    OperationActionResponseSerializer,
    OperationResponseSerializer,
    OperationsListResponseSerializer,
    OperationStatusResponseSerializer,
)
from operations.models import STATUSES, SUPERSEDED_BY, Operation
from operations.selectors import OperationReport

NOW = datetime(2025, 1, 1, tzinfo=UTC)


def _declared(serializer_class: type) -> list[str]:
    return list(serializer_class().fields)


def _operation(status: str, **fields: object) -> Operation:
    defaults: dict[str, object] = {
        "bank_id": "b", "operation_type": "refresh_mental_model", "mental_model_id": "m",
        "status": status, "payload": {"items": [{"document_id": "d"}]},
        "details": {"outcome": "updated", "failure_reason": None}, "result_metadata": {},
        "created_at": NOW, "updated_at": NOW, "completed_at": NOW,
    }
    return Operation(**{**defaults, **fields})


def _reports(status: str) -> list[OperationReport]:
    own = _operation(status)
    carrier = _operation(status)
    merged = _operation("failed", result_metadata={SUPERSEDED_BY: str(carrier.id)})
    return [OperationReport(operation=own, carrier=own),
            OperationReport(operation=merged, carrier=carrier)]


@pytest.mark.parametrize("status", STATUSES)
def test_a_listed_operation_has_the_declared_fields_in_order(status: str) -> None:
    for report in _reports(status):
        assert list(OperationResponseSerializer.render(report)) == \
            _declared(OperationResponseSerializer)


@pytest.mark.parametrize("status", STATUSES)
@pytest.mark.parametrize("include_payload", [False, True])
def test_an_operation_status_has_the_declared_fields_in_order(status: str,
                                                              include_payload: bool) -> None:
    for report in _reports(status):
        body = OperationStatusResponseSerializer.render_report(report,
                                                        include_payload=include_payload)
        assert list(body) == _declared(OperationStatusResponseSerializer)


def test_an_operation_not_found_has_the_declared_fields_in_order() -> None:
    body = OperationStatusResponseSerializer.render_not_found("nope")
    assert list(body) == _declared(OperationStatusResponseSerializer)
    assert body["operation_id"] == "nope"
    assert body["status"] == "not_found"
    assert {k for k, v in body.items() if v is not None} == {"operation_id", "status"}


def test_the_list_and_the_action_answers_have_their_declared_fields_in_order() -> None:
    page = OperationsListResponseSerializer.render(
        {"bank_id": "b", "operations": _reports("completed"), "total": 2, "limit": 20,
         "offset": 0})
    assert list(page) == _declared(OperationsListResponseSerializer)
    assert [list(item) for item in page["operations"]] == \
        [_declared(OperationResponseSerializer)] * 2
    assert list(OperationActionResponseSerializer.render(
        {"operation_id": uuid.uuid4(), "message": "done"})) == \
        _declared(OperationActionResponseSerializer)
