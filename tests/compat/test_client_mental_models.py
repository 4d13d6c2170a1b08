"""The official hindsight-client 1.1.0 mental-model calls against our running server
(``live_server``) and a real Celery worker, with the scripted LLM writing the documents.

Asserts content and ``based_on`` (the seeded memory ids), not only status codes.
"""

from __future__ import annotations

import threading

import pytest
from hindsight_client import Hindsight
from hindsight_client.hindsight_client import _run_async
from hindsight_client_api.exceptions import ApiException

from fakes.llm_server import Reply
from mentalmodels.models import MentalModel
from tests.workers import wait_until

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.integration]

BANK = "compat-mm"


def documents(server, by_query: dict[str, str]):
    """Forced turns call their tool; the free turn answers for the model's source query,
    citing every memory id the tools fed back."""
    lock = threading.Lock()

    def respond(body: dict) -> Reply:
        choice = body.get("tool_choice")
        if isinstance(choice, dict):
            return Reply.tool_calls([(choice["function"]["name"], {"query": "team"})])
        first_user = next(m["content"] for m in body["messages"] if m["role"] == "user")
        answer = next((a for q, a in by_query.items() if q in first_user), "no match")
        ids: list[str] = []
        with lock:
            for message in body["messages"]:
                if message.get("role") == "tool":
                    for item in _items(message["content"]):
                        ids.append(item)
        return Reply.tool_calls([("done", {"answer": answer, "memory_ids": sorted(set(ids)),
                                           "mental_model_ids": []})])

    server.respond_with(respond)


def _items(content: str) -> list[str]:
    import json

    payload = json.loads(content)
    out = []
    for key in ("facts", "observations"):
        out += [item["id"] for item in payload.get(key, [])]
    return out


def wait_operation(client: Hindsight, op_id: str, timeout: float = 90.0):
    def done():
        op = _run_async(client.operations.get_operation_status(BANK, op_id))
        return op if op.status in ("completed", "failed", "cancelled") else None

    return wait_until(done, timeout, interval=0.2, message=f"operation {op_id}")


@pytest.fixture
def seeded(client: Hindsight, llm, worker_factory) -> dict[str, str]:
    client.create_bank(BANK, name="Compat MM")
    # These tests count the LLM requests of refreshes: no consolidation of the seed facts.
    client.update_bank_config(BANK, enable_auto_consolidation=False)
    result = client.retain_batch(BANK, [
        {"content": "Alice prefers async communication over Slack.", "tags": ["team"],
         "strategy": "verbatim"},
        {"content": "Bob runs the Monday standup.", "tags": ["team", "bob"],
         "strategy": "verbatim"},
        {"content": "Carol's cat is called Miso.", "tags": ["carol"], "strategy": "verbatim"},
    ])
    assert result.success
    from hindsight.banks.models import MemoryUnit

    ids = {m.text.split()[0]: str(m.id) for m in MemoryUnit.objects.filter(bank_id=BANK)}
    assert set(ids) == {"Alice", "Bob", "Carol's"}
    llm.reset()
    worker_factory(env=llm.env)
    return ids


def test_the_client_drives_the_whole_mental_model_lifecycle(client: Hindsight, llm, seeded):
    documents(llm, {
        "How does the team communicate?": "## Team\n\nAlice prefers async; Bob runs standups.",
        "What about Carol?": "## Carol\n\nCarol has a cat named Miso.",
    })

    created = client.create_mental_model(
        BANK, "Team communication", "How does the team communicate?", tags=["team"],
        max_tokens=1024, trigger={"refresh_after_consolidation": False, "keep_trace": True},
        id="team-comms",
    )
    assert created.mental_model_id == "team-comms"
    op = wait_operation(client, created.operation_id)
    assert op.status == "completed"
    assert op.details.outcome == "content_written" and op.details.failure_reason is None

    other = client.create_mental_model(BANK, "Carol", "What about Carol?")
    assert other.mental_model_id.startswith("mm-") and len(other.mental_model_id) == 35
    assert wait_operation(client, other.operation_id).status == "completed"

    # get at each detail level
    full = client.get_mental_model(BANK, "team-comms")
    assert full.content == "## Team\n\nAlice prefers async; Bob runs standups."
    world_ids = {e["id"] for e in full.reflect_response["based_on"]["world"]}
    assert world_ids == {seeded["Alice"], seeded["Bob"]}  # all_strict on ["team"]: not Carol
    assert full.reflect_response["outcome"] == "content_written"
    assert full.reflect_response["trace"]["tool_calls"]
    assert full.max_tokens == 1024 and full.trigger.keep_trace is True
    assert full.is_stale is False and full.is_knowledge_page is False
    content = client.get_mental_model(BANK, "team-comms", detail="content")
    assert content.content == full.content and content.reflect_response is None
    meta = client.get_mental_model(BANK, "team-comms", detail="metadata")
    assert meta.content is None and meta.source_query is None and meta.is_stale is False

    # list: detail levels, pagination, tag filters
    listed = client.list_mental_models(BANK)
    assert listed.total == 2 and listed.limit == 100
    assert all(i.content is None for i in listed.items)
    assert {i.id for i in listed.items} == {"team-comms", other.mental_model_id}
    page = client.list_mental_models(BANK, detail="full", limit=1, offset=1)
    assert len(page.items) == 1 and page.total == 2 and page.items[0].reflect_response
    tagged = client.list_mental_models(BANK, tags=["team"], detail="content")
    assert [i.id for i in tagged.items] == ["team-comms"] and tagged.items[0].content == full.content
    assert client.list_mental_models(BANK, tags=["team", "x"], tags_match="all").total == 0

    # a new memory in scope makes it stale; refresh reads it
    client.retain(BANK, "Dana joined the team and prefers email.", tags=["team"],
                  strategy="verbatim")
    assert client.get_mental_model(BANK, "team-comms").is_stale is True
    documents(llm, {"How does the team communicate?": "## Team\n\nAsync, standups, email."})
    refreshed = client.refresh_mental_model(BANK, "team-comms", mode="full")
    assert wait_operation(client, refreshed.operation_id).status == "completed"
    after = client.get_mental_model(BANK, "team-comms")
    assert after.content == "## Team\n\nAsync, standups, email." and after.is_stale is False

    history = client.get_mental_model_history(BANK, "team-comms")
    assert [h["kind"] for h in history] == ["version", "version"]
    assert history[0]["previous_content"] == full.content and history[1]["previous_content"] == ""

    # update
    updated = client.update_mental_model(BANK, "team-comms", name="Team comms v2",
                                         trigger={"refresh_cron": "0 3 * * *"})
    assert updated.name == "Team comms v2" and updated.trigger.refresh_cron == "0 3 * * *"
    assert updated.trigger.keep_trace is True  # merged key by key

    # dry run: a preview that writes nothing
    documents(llm, {"How does the team communicate?": "## Team\n\nA different take."})
    preview = client.dry_run_refresh_mental_model(BANK, "team-comms")
    assert preview.mental_model_id == "team-comms" and preview.effective_mode == "full"
    assert preview.outcome == "content_written" and preview.would_persist is True
    assert preview.current_content == after.content
    assert preview.preview_content == "## Team\n\nA different take."
    assert preview.diff.startswith("--- current\n+++ preview\n")
    assert preview.scope.tags_match == "all_strict" and "team-comms" in preview.scope.exclude_mental_model_ids
    assert preview.delta_operations is None and preview.retraction is None
    assert client.get_mental_model(BANK, "team-comms").content == after.content

    # clear keeps the content as a version
    cleared = client.clear_mental_model(BANK, "team-comms")
    assert cleared.content == "" and cleared.last_memory_seen_at is None
    assert client.get_mental_model_history(BANK, "team-comms")[0]["previous_content"] == after.content

    # errors
    with pytest.raises(ApiException) as info:
        client.create_mental_model(BANK, "dup", "q", id="team-comms")
    assert info.value.status == 409
    with pytest.raises(ApiException) as info:
        client.create_mental_model(BANK, "bad", "q", id="Bad ID!")
    assert info.value.status == 422
    with pytest.raises(ApiException) as info:
        client.create_mental_model(BANK, "bad", "q", trigger={"response_schema": {"type": "object"}})
    assert info.value.status == 422
    with pytest.raises(ApiException) as info:
        client.get_mental_model(BANK, "does-not-exist")
    assert info.value.status == 404

    client.delete_mental_model(BANK, "team-comms")
    with pytest.raises(ApiException) as info:
        client.delete_mental_model(BANK, "team-comms")
    assert info.value.status == 404
    assert not MentalModel.objects.filter(mental_model_id="team-comms").exists()


def test_the_client_reads_a_nothing_in_reach_dry_run(client: Hindsight, llm, seeded):
    created = client.create_mental_model(BANK, "Nobody", "Who is Zed?", tags=["zed"], id="zed")
    op = wait_operation(client, created.operation_id)
    assert op.status == "completed" and op.details.outcome == "content_preserved_no_new_facts"
    assert llm.requests == []  # nothing in reach: no LLM request at all
    preview = client.dry_run_refresh_mental_model(BANK, "zed")
    assert preview.outcome == "content_preserved_no_new_facts" and preview.would_persist is False
    assert preview.diff == "" and preview.window.watermark is None
    assert preview.warnings and "Nothing in this document's scope" in preview.warnings[0]
    assert llm.requests == []
