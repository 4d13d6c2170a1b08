"""Webhooks in the admin: listed with their run of failures and why one was disabled, their
deliveries beneath them, added and changed through the services (the SSRF guard refuses an
internal address typed here too), enabled and disabled by action; the secret never shown."""

from __future__ import annotations

import pytest

from hindsight.webhooks.models import Webhook, WebhookDelivery
from hindsight.webhooks.outbox import emit
from tests.factories import make_bank

pytestmark = pytest.mark.django_db

LIST = "/admin/webhooks/webhook/"


def form(**fields) -> dict:
    return {"bank": "adm", "url": "https://hooks.example.com/in",
            "event_types": ["retain.completed", "mental_model.refreshed"], "enabled": "on",
            "new_secret": "", "deliveries-TOTAL_FORMS": "0", "deliveries-INITIAL_FORMS": "0",
            **fields}


def test_add_change_and_the_deliveries_beneath(admin_client):
    make_bank("adm")
    response = admin_client.post(LIST + "add/", form(new_secret="top-secret"))
    assert response.status_code == 302, response.context["adminform"].form.errors
    hook = Webhook.objects.get()
    assert (hook.url, hook.event_types, hook.secret) == (
        "https://hooks.example.com/in", ["retain.completed", "mental_model.refreshed"],
        "top-secret")
    emit(bank_id="adm", event="retain.completed", data={})
    WebhookDelivery.objects.update(status="failed", attempts=6, last_response_status=503,
                                   last_error="HTTP 503")
    Webhook.objects.update(enabled=False, consecutive_failures=5,
                           disabled_reason="disabled after 5 deliveries in a row ended failed")
    listed = admin_client.get(LIST).content.decode()
    assert "disabled after 5 deliveries in a row ended failed" in listed
    page = admin_client.get(f"{LIST}{hook.pk}/change/").content.decode()
    assert "HTTP 503" in page and "retain.completed" in page and "top-secret" not in page

    response = admin_client.post(f"{LIST}{hook.pk}/change/", form(enabled="on"))
    assert response.status_code == 302
    hook.refresh_from_db()
    assert hook.enabled and hook.consecutive_failures == 0 and hook.secret == "top-secret"
    assert WebhookDelivery.objects.count() == 1


def test_an_internal_address_is_refused_and_actions_toggle(admin_client):
    make_bank("adm")
    response = admin_client.post(LIST + "add/", form(url="http://169.254.169.254/"))
    assert response.status_code == 200 and not Webhook.objects.exists()
    assert "private, loopback or link-local" in response.content.decode()
    hook = Webhook.objects.create(bank_id="adm", url="https://hooks.example.com/in")
    admin_client.post(LIST, {"action": "disable", "_selected_action": [str(hook.pk)]})
    assert Webhook.objects.get().enabled is False
    admin_client.post(LIST, {"action": "enable", "_selected_action": [str(hook.pk)]})
    assert Webhook.objects.get().enabled is True
