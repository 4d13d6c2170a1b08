"""A refresh whose pool process is SIGKILLed while another refresh of the model is queued
behind it, followed through the official hindsight-client 1.1.0: the killed attempt's work
moves to the queued one (the merge rule), and the first operation id — the one the client was
given and polls — ends ``completed`` with it and names it."""

from __future__ import annotations

import os
import signal

import pytest
from hindsight_client import Hindsight
from hindsight_client.hindsight_client import _run_async

from fakes.llm_server import Reply
from mentalmodels.models import MentalModel
from operations.models import FAILED, Lease, Operation
from tests.compat.test_client_mental_models import documents
from tests.workers import apply_test_settings, wait_until

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.integration]

BANK = "compat-lost"


def _status(client: Hindsight, op_id: str):
    return _run_async(client.operations.get_operation_status(BANK, op_id))


def test_killed_refresh_with_a_queued_follower_reports_completed_and_names_the_follower(
    client: Hindsight, scripted_llm, openai_embeddings, worker_factory, settings
) -> None:
    # Only the worker's own fast recovery can bring the killed refresh back in this test.
    apply_test_settings(settings, recovery_threshold_seconds=600.0,
                        redispatch_after_seconds=600.0, lock_ttl_seconds=20.0)
    client.create_bank(BANK, name="Lost workers")
    # No consolidation of the retain: the held LLM call below must be the refresh's.
    client.update_bank_config(BANK, enable_auto_consolidation=False)
    assert client.retain_batch(BANK, [{"content": "Alice prefers async communication.",
                                       "tags": ["team"], "strategy": "verbatim"}]).success
    scripted_llm.reset()
    documents(scripted_llm, {"How does the team communicate?": "## Team\n\nAlice writes async."})
    held, hold = Reply.hold(Reply.text("never read"))
    scripted_llm.script(held)  # the first refresh's first LLM call waits here
    worker_factory(env=scripted_llm.env)

    created = client.create_mental_model(BANK, "Team", "How does the team communicate?",
                                         tags=["team"], id="team")
    first_id = created.operation_id
    assert hold.wait_received(timeout=60), "the first refresh never reached the LLM"
    assert _status(client, first_id).status == "processing"
    follower_id = client.refresh_mental_model(BANK, "team").operation_id
    assert follower_id != first_id and _status(client, follower_id).status == "pending"

    key = Operation.objects.get(id=first_id).dedupe_key
    pid = int(Lease.objects.get(key=key).holder.split(":")[-2])  # host:pid:message
    os.kill(pid, signal.SIGKILL)
    hold.release()

    done = wait_until(lambda: (s := _status(client, first_id)).status == "completed" and s,
                      timeout=60, interval=0.2, message="the first id completed")
    assert done.operation_id == first_id and done.operation_type == "refresh_mental_model"
    assert done.result_metadata["superseded_by"] == follower_id
    assert done.result_metadata["carried_by"] == follower_id
    assert done.details.outcome == "content_written" and done.error_message is None
    assert _status(client, follower_id).status == "completed"
    listed = _run_async(client.operations.list_operations(BANK, type="refresh_mental_model"))
    assert {o.id: o.status for o in listed.operations} == {first_id: "completed",
                                                          follower_id: "completed"}
    assert _run_async(client.operations.list_operations(BANK, status="failed")).total == 0

    row = Operation.objects.get(id=first_id)  # its own attempt did fail, and says where it went
    assert row.status == FAILED and follower_id in row.error_message
    assert "worker lost" in row.error_message
    model = MentalModel.objects.get(bank_id=BANK, mental_model_id="team")
    assert model.content == "## Team\n\nAlice writes async."
    assert model.last_refresh_failed_at is None
    assert client.get_mental_model(BANK, "team").content == model.content
