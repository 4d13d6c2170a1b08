"""The official hindsight-client 1.1.0 sees a retained fact reach a mental model by itself:
retain → consolidation → refresh_after_consolidation, through the client's own calls only
(live server, a real Celery worker, the scripted LLM of fakes/consolidation_llm.py)."""

from __future__ import annotations

import pytest
from hindsight_client import Hindsight
from hindsight_client.hindsight_client import _run_async

from fakes.consolidation_llm import ConsolidatingLLM
from tests.workers import wait_until

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.integration]

BANK = "compat-consolidation"


def test_retain_then_poll_until_consolidated_and_the_flagged_model_reflects_the_fact(
    client: Hindsight, llm, worker_factory
):
    ConsolidatingLLM(llm)
    worker_factory(env=llm.env)
    client.create_bank(BANK, name="Compat consolidation")
    created = client.create_mental_model(
        BANK, "Team", "How does the team communicate?", tags=["team"],
        trigger={"refresh_after_consolidation": True}, id="team",
    )

    def first_refresh_done():
        op = _run_async(client.operations.get_operation_status(BANK, created.operation_id))
        return op.status == "completed"

    wait_until(first_refresh_done, 60, interval=0.2, message="the first refresh")
    assert client.get_mental_model(BANK, "team").content == ""

    result = client.retain(BANK, "Alice prefers async communication", tags=["team"])
    assert result.success

    def consolidated():
        stats = _run_async(client.banks.get_agent_stats(BANK))
        return stats if stats.pending_consolidation == 0 and stats.total_observations else None

    stats = wait_until(consolidated, 60, interval=0.2, message="pending_consolidation to reach 0")
    assert stats.last_consolidated_at is not None and stats.failed_consolidation == 0

    def reflects():
        model = client.get_mental_model(BANK, "team")
        return model if "Alice prefers async communication" in (model.content or "") else None

    model = wait_until(reflects, 60, interval=0.2, message="the model to reflect the fact")
    assert model.is_stale is False
    assert model.last_refreshed_at is not None
    observations = client.list_memories(BANK, type="observation")
    assert [o.tags for o in observations.items] == [["team"]]
    queued = _run_async(client.banks.trigger_consolidation(BANK))
    assert queued.operation_id and queued.deduplicated is False

    def finished():
        op = _run_async(client.operations.get_operation_status(BANK, queued.operation_id))
        return op if op.status in ("completed", "failed") else None

    op = wait_until(finished, 60, interval=0.2, message="the manual consolidation")
    assert op.status == "completed" and op.details is None
