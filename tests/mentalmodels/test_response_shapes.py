"""Each response serializer is the one owner of its shape: what ``render`` builds is what the
serializer declares (and so what the OpenAPI document says), key for key and in order."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

import pytest

from mentalmodels.api.serializers import (
    DETAILS,
    AsyncOperationSubmitResponseSerializer,
    CreateMentalModelResponseSerializer,
    MentalModelDeleteResponseSerializer,
    MentalModelHistoryEntrySerializer,
    MentalModelListResponseSerializer,
    MentalModelResponseSerializer,
)
from mentalmodels.models import MentalModel, MentalModelHistory

NOW = datetime(2025, 1, 1, tzinfo=UTC)


def _declared(serializer_class: type) -> list[str]:
    return list(serializer_class().fields)


@pytest.mark.parametrize("detail", DETAILS)
def test_a_rendered_model_has_the_declared_fields_in_order(detail: str) -> None:
    model = MentalModel(bank_id="b", mental_model_id="m", name="n", source_query="q", tags=["t"],
                        content="c", trigger={}, reflect_response={"text": "c"},
                        created_at=NOW)
    body = MentalModelResponseSerializer.render(model, detail=detail, is_stale=False)
    assert list(body) == _declared(MentalModelResponseSerializer)


def test_the_small_responses_have_their_declared_fields_in_order() -> None:
    assert list(MentalModelListResponseSerializer.render([], total=0, limit=1, offset=0)) == \
        _declared(MentalModelListResponseSerializer)
    assert list(CreateMentalModelResponseSerializer.render("m", uuid.uuid4())) == \
        _declared(CreateMentalModelResponseSerializer)
    assert list(AsyncOperationSubmitResponseSerializer.render(uuid.uuid4())) == \
        _declared(AsyncOperationSubmitResponseSerializer)
    assert list(MentalModelDeleteResponseSerializer.render()) == \
        _declared(MentalModelDeleteResponseSerializer)


@pytest.mark.parametrize(("kind", "left_out"), [
    ("version", {"reason", "exception", "operation_id"}),
    ("failure", {"previous_reflect_response"}),
])
def test_a_history_entry_has_the_declared_fields_in_order_but_the_other_kinds(
    kind: str, left_out: set[str]
) -> None:
    entry = MentalModelHistory(kind=kind, previous_content="p", reason="r", exception="e",
                               operation_id=uuid.uuid4(), changed_at=NOW)
    body = MentalModelHistoryEntrySerializer.render(entry)
    declared = _declared(MentalModelHistoryEntrySerializer)
    assert list(body) == [name for name in declared if name not in left_out]
    # What a kind leaves out is what the document marks optional for it.
    fields = MentalModelHistoryEntrySerializer().fields
    assert all(not fields[name].required for name in left_out)
