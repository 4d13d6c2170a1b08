"""The webhooks API in process: upstream's shapes, every malformed request a 422 naming the
field, the SSRF guard at create and update, the secret never answered, a bank's webhooks
invisible to another."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from hindsight.webhooks.models import Webhook, WebhookDelivery
from hindsight.webhooks.outbox import emit
from tests.factories import make_bank

pytestmark = pytest.mark.django_db

URL = "/v1/default/banks/bank/webhooks"


@pytest.fixture(autouse=True)
def _bank(bank: Any) -> None:
    make_bank("other")


def test_create_list_update_delete_in_upstreams_shapes(api):
    created = api.post(URL, {"url": "https://hooks.example.com/in", "secret": "abc"},
                       format="json")
    assert created.status_code == 201, created.content
    body = created.json()
    assert list(body) == ["id", "bank_id", "url", "secret", "event_types", "enabled",
                          "http_config", "created_at", "updated_at", "consecutive_failures",
                          "disabled_reason"]
    assert body["secret"] is None and body["event_types"] == ["consolidation.completed"]
    assert body["http_config"] == {"method": "POST", "timeout_seconds": 30, "headers": {},
                                   "params": {}}
    assert Webhook.objects.get(id=body["id"]).secret == "abc"

    listed = api.get(URL).json()
    assert [h["id"] for h in listed["items"]] == [body["id"]]
    assert (listed["total"], listed["limit"], listed["offset"]) == (1, 100, 0)
    assert "abc" not in str(listed)

    changed = api.patch(f"{URL}/{body['id']}", {
        "event_types": ["retain.completed", "mental_model.refreshed"], "secret": None,
        "http_config": {"method": "get", "timeout_seconds": 5, "headers": {"X-Team": "ops"}}},
        format="json").json()
    assert changed["event_types"] == ["retain.completed", "mental_model.refreshed"]
    assert changed["http_config"] == {"method": "GET", "timeout_seconds": 5,
                                      "headers": {"X-Team": "ops"}, "params": {}}
    assert Webhook.objects.get(id=body["id"]).secret is None

    deleted = api.delete(f"{URL}/{body['id']}")
    assert deleted.json() == {"success": True, "message": "Webhook deleted", "deleted_count": 1}
    assert api.get(URL).json()["total"] == 0
    assert api.get(f"{URL}/{body['id']}/deliveries").status_code == 404


@pytest.mark.parametrize(("body", "loc"), [
    ({}, ["body", "url"]),
    ({"url": 5}, ["body", "url"]),
    ({"url": "ftp://example.com/x"}, ["body", "url"]),
    ({"url": "https://"}, ["body", "url"]),
    ({"url": "https://example.com", "event_types": ["page.changed"]}, ["body", "event_types", 0]),
    ({"url": "https://example.com", "http_config": {"method": "PUT"}},
     ["body", "http_config", "method"]),
    ({"url": "https://example.com", "http_config": {"timeout_seconds": 0}},
     ["body", "http_config", "timeout_seconds"]),
    ({"url": "https://example.com", "http_config": {"headers": {"X": 1}}},
     ["body", "http_config", "headers", "X"]),
    ({"url": "https://example.com", "enabled": "yes"}, ["body", "enabled"]),
    ({"url": "https://example.com", "colour": "red"}, ["body", "colour"]),
])
def test_a_malformed_webhook_is_a_422_naming_the_field_and_nothing_is_stored(api, body, loc):
    response = api.post(URL, body, format="json")
    assert response.status_code == 422, response.content
    assert loc in [e["loc"] for e in response.json()["detail"]], response.json()
    assert not Webhook.objects.exists()


@pytest.mark.parametrize("target", [
    "http://127.0.0.1:8080/hook", "http://[::1]/",
    "http://169.254.169.254/latest/meta-data", "http://10.1.2.3/", "http://192.168.0.4/",
    "http://100.64.0.1/", "http://0.0.0.0/", "http://2130706433/", "http://0x7f.1/",
    "http://[::ffff:127.0.0.1]/", "http://172.16.0.1/",
])
def test_an_internal_address_is_refused_at_create_and_at_update(api, target):
    response = api.post(URL, {"url": target}, format="json")
    assert response.status_code == 422, (target, response.content)
    assert response.json()["detail"][0]["loc"] == ["body", "url"]
    hook = api.post(URL, {"url": "https://example.com/in"}, format="json").json()
    moved = api.patch(f"{URL}/{hook['id']}", {"url": target}, format="json")
    assert moved.status_code == 422
    assert Webhook.objects.get().url == "https://example.com/in"


def test_the_allowlist_lets_a_named_internal_address_through(api, settings):
    settings.HINDSIGHT = dataclasses.replace(settings.HINDSIGHT,
                                             webhook_allowed_hosts=("10.0.0.0/8", "127.0.0.1"))
    for target in ("http://10.9.9.9/in", "http://127.0.0.1:9000/in"):
        assert api.post(URL, {"url": target}, format="json").status_code == 201
    assert api.post(URL, {"url": "http://192.168.1.1/"}, format="json").status_code == 422


def test_unknown_ids_and_banks(api):
    assert api.get("/v1/default/banks/nobank/webhooks").status_code == 404
    assert api.post("/v1/default/banks/nobank/webhooks", {"url": "https://example.com"},
                    format="json").status_code == 404
    assert api.patch(f"{URL}/not-a-uuid", {"enabled": False}, format="json").status_code == 422
    assert api.delete(f"{URL}/00000000-0000-0000-0000-000000000000").status_code == 404
    assert api.patch(f"{URL}/00000000-0000-0000-0000-000000000000", {},
                     format="json").status_code == 404
    hook = api.post(URL, {"url": "https://example.com"}, format="json").json()
    nothing = api.patch(f"{URL}/{hook['id']}", {}, format="json")
    assert nothing.status_code == 422 and "No fields provided" in nothing.content.decode()
    # Another bank's webhook is unknown under this bank.
    other = api.post("/v1/default/banks/other/webhooks", {"url": "https://example.com"},
                     format="json").json()
    assert api.delete(f"{URL}/{other['id']}").status_code == 404
    assert api.get(f"{URL}/{other['id']}/deliveries").status_code == 404


def test_deliveries_page_newest_first_by_cursor(api, settings):
    hook = api.post(URL, {"url": "https://example.com", "event_types": ["retain.completed"]},
                    format="json").json()
    for n in range(3):
        emit(bank_id="bank", event="retain.completed", data={"n": n})
    first = api.get(f"{URL}/{hook['id']}/deliveries?limit=2").json()
    assert len(first["items"]) == 2 and first["next_cursor"]
    item = first["items"][0]
    assert list(item) == ["id", "event_id", "webhook_id", "url", "event_type", "status",
                          "attempts", "next_retry_at", "last_error", "last_response_status",
                          "last_response_body", "last_attempt_at", "created_at", "updated_at"]
    assert (item["status"], item["attempts"], item["webhook_id"]) == ("pending", 0, hook["id"])
    rest = api.get(f"{URL}/{hook['id']}/deliveries",
                   {"limit": 2, "cursor": first["next_cursor"]}).json()
    assert len(rest["items"]) == 1 and rest["next_cursor"] is None
    ids = [i["id"] for i in first["items"] + rest["items"]]
    assert ids == [str(d.id) for d in WebhookDelivery.objects.order_by("-created_at")]
    assert api.get(f"{URL}/{hook['id']}/deliveries?cursor=yesterday").status_code == 422
    assert api.get(f"{URL}/{hook['id']}/deliveries?limit=500").status_code == 422


def test_deleting_the_bank_takes_its_webhooks_and_deliveries(api):
    api.post(URL, {"url": "https://example.com", "event_types": ["retain.completed"]},
             format="json")
    emit(bank_id="bank", event="retain.completed", data={})
    assert api.delete("/v1/default/banks/bank").status_code == 200
    assert not Webhook.objects.exists() and not WebhookDelivery.objects.exists()
