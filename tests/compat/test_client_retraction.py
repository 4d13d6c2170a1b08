"""Delta mode's retraction step through the official hindsight-client 1.1.0, a real worker and
the scripted LLM (docs/behaviour.md#retracted-facts): a fact a delta page cites is invalidated,
the page reads stale, the dry run and the next refresh are shown the retraction, and the
document, its citations and its trace follow."""

from __future__ import annotations

import pytest
from hindsight_client import Hindsight
from hindsight_client.hindsight_client import _run_async
from hindsight_client_api.models import UpdateMemoryRequest

from fakes.delta_llm import delta_llm, remove_retracted
from hindsight.banks.models import MemoryUnit
from tests.workers import wait_until

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.integration]

BANK = "compat-retraction"
DOC = "## Team\n\n- Alice prefers async communication.\n\n- Bob runs the Monday standup."


def wait_operation(client: Hindsight, op_id: str):
    def done():
        op = _run_async(client.operations.get_operation_status(BANK, op_id))
        return op if op.status in ("completed", "failed", "cancelled") else None

    return wait_until(done, 90.0, interval=0.2, message=f"operation {op_id}")


def test_an_invalidated_fact_is_retracted_from_a_delta_page(client: Hindsight, llm,
                                                            worker_factory) -> None:
    client.create_bank(BANK, name="Retraction")
    client.update_bank_config(BANK, enable_auto_consolidation=False)
    assert client.retain_batch(BANK, [
        {"content": "Alice prefers async communication.", "tags": ["team"], "strategy": "verbatim"},
        {"content": "Bob runs the Monday standup.", "tags": ["team"], "strategy": "verbatim"},
    ]).success
    ids = {m.text.split()[0]: str(m.id) for m in MemoryUnit.objects.filter(bank_id=BANK)}
    llm.reset()
    worker_factory(env=llm.env)
    calls = delta_llm(llm, remove_retracted, answer=DOC)

    created = client.create_mental_model(
        BANK, "Team", "How does the team work?", tags=["team"], id="team",
        trigger={"mode": "delta", "keep_trace": True, "refresh_after_consolidation": False})
    assert wait_operation(client, created.operation_id).status == "completed"
    page = client.get_mental_model(BANK, "team")
    assert page.content == DOC
    assert {e["id"] for e in page.reflect_response["based_on"]["world"]} == set(ids.values())

    _run_async(client.memory.update_memory(
        BANK, ids["Bob"], UpdateMemoryRequest(state="invalidated", reason="Bob left")))
    assert client.get_mental_model(BANK, "team").is_stale is True

    preview = client.dry_run_refresh_mental_model(BANK, "team")
    assert preview.effective_mode == "delta" and preview.would_persist is True
    assert preview.retraction.fact_ids == [ids["Bob"]]
    assert preview.retraction.fact_texts == ["Bob runs the Monday standup."]
    assert preview.retraction.applied is True and preview.retraction.deferred_reason is None
    assert preview.trace.retraction == preview.retraction
    assert "Bob" not in preview.preview_content
    assert [c.retracted for c in calls] == [[("Bob runs the Monday standup.", "removed", None)]]

    refreshed = client.refresh_mental_model(BANK, "team")
    op = wait_operation(client, refreshed.operation_id)
    assert op.status == "completed" and op.details.outcome == "content_written"
    after = client.get_mental_model(BANK, "team")
    assert after.content.rstrip() == "## Team\n\n- Alice prefers async communication."
    assert after.is_stale is False
    assert {e["id"] for e in after.reflect_response["based_on"]["world"]} == {ids["Alice"]}
    trace = after.reflect_response["trace"]
    assert trace["effective_mode"] == "delta"
    assert trace["retraction"]["fact_ids"] == [ids["Bob"]] and trace["retraction"]["applied"]
    assert [a["operation"]["op"] for a in trace["delta_operations"]["applied"]] == ["remove_block"]
