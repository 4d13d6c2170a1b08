"""``hindsight webhook …`` in-process against the live server over HTTP: JSON output is the
API's answer, the tables say what happened, a refused call is one line and exit code 1."""

from __future__ import annotations

import pytest

from hindsight.webhooks.models import Webhook
from hindsight.webhooks.outbox import emit
from tests.factories import make_bank
from tests.surfaces.cli.invoke import as_json, cli_against

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.integration]

BANK = "cli-webhooks"


@pytest.fixture
def cli(live_server):
    make_bank(BANK)
    return cli_against(live_server.url)


def test_the_webhook_commands_create_list_update_show_deliveries_and_delete(cli):
    created = as_json(cli("-o", "json", "webhook", "create", BANK, "https://hooks.example.com/in",
                          "--events", "retain.completed,mental_model.refreshed",
                          "--secret", "k", "--header", "X-Team=ops", "--timeout", "10"))
    assert created["event_types"] == ["retain.completed", "mental_model.refreshed"]
    assert created["secret"] is None and created["http_config"]["headers"] == {"X-Team": "ops"}
    assert Webhook.objects.get(id=created["id"]).secret == "k"

    table = cli("-o", "table", "webhook", "list", BANK).stdout
    assert "Webhooks (1)" in table and "│ yes" in table
    assert as_json(cli("-o", "json", "webhook", "list", BANK))["total"] == 1

    updated = as_json(cli("-o", "json", "webhook", "update", BANK, created["id"],
                          "--enabled", "false", "--clear-secret"))
    assert updated["enabled"] is False and Webhook.objects.get(id=created["id"]).secret is None

    cli("webhook", "update", BANK, created["id"], "--enabled", "true")
    emit(bank_id=BANK, event="retain.completed", data={})
    deliveries = as_json(cli("-o", "json", "webhook", "deliveries", BANK, created["id"]))
    assert [(d["event_type"], d["status"]) for d in deliveries["items"]] == [
        ("retain.completed", "pending")]
    assert "retain.completed" in cli("-o", "table", "webhook", "deliveries", BANK,
                                     created["id"]).stdout

    assert "Deleted webhook" in cli("-o", "table", "webhook", "delete", BANK, created["id"],
                                    "-y").stdout
    assert not Webhook.objects.exists()


def test_a_refused_webhook_is_one_line_and_exit_code_1(cli):
    refused = cli("webhook", "create", BANK, "http://169.254.169.254/latest", code=1)
    assert str(refused.exception).startswith("HTTP 422: body.url: webhook URL host ")
    assert cli("webhook", "create", BANK, "https://example.com", "--header", "nocolon",
               code=2).exit_code == 2
    assert not Webhook.objects.exists()
