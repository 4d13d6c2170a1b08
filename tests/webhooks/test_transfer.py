"""A bank's webhooks travel in its archive as upstream's ``webhooks.json`` rows (the secret with
them) and come back with the bank's configuration; without it, they stay behind."""

from __future__ import annotations

import pytest

from hindsight.webhooks.models import Webhook
from mentalmodels.transfer.exporter import Scope, bank_export
from mentalmodels.transfer.importer import ImportRequest, bank_import
from tests.factories import make_bank
from tests.transfer.archives import entry, rewritten

pytestmark = pytest.mark.django_db

FIELDS = ("url", "secret", "event_types", "enabled", "http_config")


def _source() -> list[Webhook]:
    make_bank("source")
    return [
        Webhook.objects.create(bank_id="source", url="https://hooks.example.com/a", secret="k1",
                               event_types=["retain.completed", "mental_model.refreshed"],
                               http_config={"method": "POST", "timeout_seconds": 10,
                                            "headers": {"X-Team": "ops"}, "params": {}}),
        Webhook.objects.create(bank_id="source", url="https://hooks.example.com/b",
                               enabled=False, event_types=["consolidation.completed"]),
    ]


def test_webhooks_are_exported_and_restored_with_the_bank(tmp_path) -> None:
    source = _source()
    path = tmp_path / "a.zip"
    with path.open("wb") as out:
        manifest = bank_export(bank_id="source", scope=Scope(), out=out)
    assert manifest["webhook_count"] == 2
    rows = entry(path.read_bytes(), "webhooks.json")
    assert [sorted(r) for r in rows] == [sorted(["id", "bank_id", *FIELDS, "created_at",
                                                 "updated_at"])] * 2
    assert rows[0]["secret"] == "k1" and rows[0]["id"] == str(source[0].id)

    counts = bank_import(path=str(path), request=ImportRequest(target_bank_id="copy"))
    assert counts["webhooks_imported"] == 2
    copied = list(Webhook.objects.filter(bank_id="copy").order_by("created_at"))
    assert [[getattr(w, f) for f in FIELDS] for w in copied] == [
        [getattr(w, f) for f in FIELDS] for w in source]
    # Ids are unique across banks: the copy's are new while the source still has its own.
    assert {w.id for w in copied}.isdisjoint({w.id for w in source})


def test_an_upstream_row_with_its_http_config_as_text_is_read(tmp_path) -> None:
    _source()
    path = tmp_path / "a.zip"
    with path.open("wb") as out:
        bank_export(bank_id="source", scope=Scope(), out=out)
    rows = entry(path.read_bytes(), "webhooks.json")
    rows[0]["http_config"] = '{"method": "GET", "timeout_seconds": 5, "headers": {}, "params": {}}'
    (tmp_path / "b.zip").write_bytes(rewritten(path.read_bytes(), {"webhooks.json": rows}))
    bank_import(path=str(tmp_path / "b.zip"), request=ImportRequest(target_bank_id="copy"))
    first = Webhook.objects.filter(bank_id="copy").order_by("created_at").first()
    assert first is not None and first.http_config["method"] == "GET"


def test_without_the_bank_configuration_no_webhook_comes_along(tmp_path) -> None:
    _source()
    path = tmp_path / "a.zip"
    with path.open("wb") as out:
        bank_export(bank_id="source", scope=Scope(), out=out)
    bank_import(path=str(path), request=ImportRequest(
        target_bank_id="copy", scope=Scope(bank_config=False)))
    assert not Webhook.objects.filter(bank_id="copy").exists()
