"""Each banks response serializer is the one owner of its shape: what ``render`` builds is what
the serializer declares (and so what the OpenAPI document says), key for key and in order."""

from __future__ import annotations

from typing import Any

from hindsight.banks import schema
from hindsight.banks.models import Bank


def _declared(serializer_class: type) -> list[str]:
    return list(serializer_class().fields)


def _nested(serializer_class: type, name: str) -> list[str]:
    field: Any = serializer_class().fields[name]
    return list(getattr(field, "child", field).fields)


def test_a_bank_profile_has_the_declared_fields_in_order() -> None:
    body = schema.BankProfileResponseSerializer.render(Bank(id="b", name="n", mission="m"))
    assert list(body) == _declared(schema.BankProfileResponseSerializer)
    assert list(body["disposition"]) == _nested(schema.BankProfileResponseSerializer,
                                                "disposition")


def test_a_bank_delete_has_the_declared_fields_in_order() -> None:
    assert list(schema.DeleteResponseSerializer.render("b", 3)) == \
        _declared(schema.DeleteResponseSerializer)
