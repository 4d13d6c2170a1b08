"""Page events, delivered by a real worker to a real receiver: ``mental_model.refreshed`` for
each outcome of a refresh, carrying what changed in the one change shape and the operation;
``mental_model.refresh_failed`` and ``mental_model.paused`` when a refresh fails for good; the
knowledge base's page events."""

from __future__ import annotations

from typing import Any

import pytest
from rest_framework.test import APIClient

from fakes.llm_server import Reply
from hindsight.webhooks.models import WebhookDelivery
from tests.factories import make_memory
from tests.mentalmodels.test_refresh_worker import answering
from tests.webhooks.receiver import Receiver, verify_signatures
from tests.workers import wait_until

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.integration]

BANK = "page-events"
MODELS = f"/v1/default/banks/{BANK}/mental-models"
PAGE_EVENTS = ["mental_model.refreshed", "mental_model.refresh_failed", "mental_model.paused",
               "knowledge_page.created", "knowledge_page.updated", "knowledge_page.deleted"]


@pytest.fixture
def bank_id() -> str:
    return BANK


def _done(api: APIClient, operation_id: str) -> None:
    wait_until(lambda: api.get(f"/v1/default/banks/{BANK}/operations/{operation_id}").json()[
        "status"] in ("completed", "failed"), 60, message=f"operation {operation_id}")


def test_every_refresh_outcome_sends_its_page_event_with_what_changed(
        bank: Any, llm, worker_factory, receiver: Receiver, webhook_settings, sweeper):
    fact = make_memory(bank, "Alice prefers async communication", embed=True)
    answering(llm, ["## Team\n\nAlice prefers async.", "## Team\n\nAlice prefers async.",
                    "## Team\n\nAlice prefers async.\n\nBob reviews on Fridays."],
              [str(fact.id)])
    worker_factory(env={**llm.env, **webhook_settings, "HINDSIGHT_API_WORKER_MAX_RETRIES": "0"})
    api = APIClient()
    api.post(f"/v1/default/banks/{BANK}/webhooks", {
        "url": receiver.url, "secret": "page-secret", "event_types": PAGE_EVENTS},
        format="json")

    # Written: the first refresh adds the whole page.
    created = api.post(MODELS, {"id": "team", "name": "Team", "source_query": "How?"},
                       format="json").json()
    (written,) = receiver.wait("mental_model.refreshed")
    verify_signatures(written, "page-secret")
    body = written.json
    assert body["operation_id"] == created["operation_id"] and body["status"] == "completed"
    data = body["data"]
    assert (data["mental_model_id"], data["name"], data["outcome"], data["operation_id"]) == (
        "team", "Team", "content_written", created["operation_id"])
    changes = data["changes"]
    assert changes["changed"] is True and changes["counts"]["sections_added"] == 1
    (section,) = changes["sections"]
    assert (section["id"], section["change"]) == ("team", "added")
    assert [(b["change"], b["after"]) for b in section["blocks"]] == [
        ("added", "Alice prefers async.")]
    assert changes["unified"].startswith("--- before\n+++ after\n")

    # Unchanged: the event still comes, saying nothing changed.
    again = api.post(f"{MODELS}/team/refresh", format="json").json()
    unchanged = receiver.wait("mental_model.refreshed", 2)[1].json
    assert unchanged["operation_id"] == again["operation_id"]
    assert unchanged["data"]["outcome"] == "content_unchanged"
    assert unchanged["data"]["changes"] == {
        "changed": False, "sections": [], "unified": "",
        "counts": dict.fromkeys(changed_counts(), 0)}

    # Changed: one block added to the section, by id.
    api.post(f"{MODELS}/team/refresh", format="json")
    grown = receiver.wait("mental_model.refreshed", 3)[2].json["data"]["changes"]
    assert grown["counts"]["blocks_added"] == 1 and grown["counts"]["sections_changed"] == 1
    (section,) = grown["sections"]
    assert [(b["change"], b["after"]) for b in section["blocks"]] == [
        ("added", "Bob reviews on Fridays.")]

    # Failed for good: refresh_failed, then paused (a permanent failure pauses the model).
    llm.respond_with(lambda body: Reply.error(400, "this prompt is too large"))
    failing = api.post(f"{MODELS}/team/refresh", format="json").json()
    (failed,) = receiver.wait("mental_model.refresh_failed")
    (paused,) = receiver.wait("mental_model.paused")
    assert failed.json["status"] == "failed" and failed.json["operation_id"] == failing[
        "operation_id"]
    assert failed.json["data"]["outcome"] == "refresh_failed_error"
    assert failed.json["data"]["failure_reason"] and failed.json["data"]["paused"] is True
    assert paused.json["data"]["mental_model_id"] == "team"
    assert len(receiver.of("mental_model.refreshed")) == 3


def changed_counts() -> list[str]:
    from mentalmodels.document.diff import COUNT_KEYS

    return list(COUNT_KEYS)


def test_knowledge_pages_send_created_updated_and_deleted(
        bank: Any, llm, worker_factory, receiver: Receiver, webhook_settings, sweeper):
    answering(llm, ["## Runbook\n\nRestart the service."], [])
    worker_factory(env={**llm.env, **webhook_settings})
    api = APIClient()
    api.post(f"/v1/default/banks/{BANK}/webhooks", {
        "url": receiver.url, "event_types": ["knowledge_page.created", "knowledge_page.updated",
                                             "knowledge_page.deleted"]}, format="json")
    kb = f"/v1/default/banks/{BANK}/knowledge-base"
    folder = api.post(f"{kb}/folders", {"name": "Ops"}, format="json").json()
    assert "id" in folder, folder
    page = api.post(f"{kb}/pages", {"name": "Runbook", "source_query": "How to restart?",
                                    "parent_id": folder["id"]}, format="json").json()
    (created,) = receiver.wait("knowledge_page.created")
    assert created.json["data"]["page_id"] == page["page_id"]
    assert created.json["operation_id"] == page["operation_id"]
    assert created.json["data"]["mental_model_id"] == page["mental_model_id"]
    assert created.json["data"]["name"] == "Runbook"
    assert created.json["data"]["parent_id"] == folder["id"]
    api.patch(f"{kb}/nodes/{page['page_id']}", {"name": "Restart runbook", "parent_id": None},
              format="json")
    (updated,) = receiver.wait("knowledge_page.updated")
    assert updated.json["data"]["name"] == "Restart runbook"
    assert updated.json["data"]["changed"] == ["name", "parent_id"]
    api.delete(f"{kb}/nodes/{page['page_id']}")
    (deleted,) = receiver.wait("knowledge_page.deleted")
    assert deleted.json["data"]["page_id"] == page["page_id"]
    # A folder is no page: its writes send nothing.
    api.patch(f"{kb}/nodes/{folder['id']}", {"name": "Operations"}, format="json")
    assert WebhookDelivery.objects.count() == 3
