"""The official hindsight-client 1.1.0 driving a delta model: create, switch to delta with
keep_trace, refresh, and a dry run whose ``delta_operations`` the client's model parses."""

from __future__ import annotations

import pytest
from hindsight_client import Hindsight
from hindsight_client_api.models.mental_model_delta_operations import MentalModelDeltaOperations

from fakes.delta_llm import append_each_fact, delta_llm
from hindsight.banks.models import MemoryUnit
from mentalmodels.document.structure import render_json
from mentalmodels.models import MentalModel
from tests.compat.test_client_mental_models import wait_operation

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.integration]

BANK = "compat-mm"  # wait_operation's bank
DOC = "## Team\n\nAlice prefers async.\n\n## Changes\n\n- baseline"


def test_the_client_drives_a_delta_model(client: Hindsight, scripted_llm, openai_embeddings,
                                         worker_factory):
    env = scripted_llm
    client.create_bank(BANK, name="Compat delta")
    client.retain(BANK, "Alice prefers async.", strategy="verbatim")
    worker_factory(env=env.env)
    delta_llm(env, append_each_fact("changes"), answer=DOC)

    created = client.create_mental_model(BANK, "Team", "How does the team work?", id="team")
    assert wait_operation(client, created.operation_id).status == "completed"
    updated = client.update_mental_model(BANK, "team",
                                         trigger={"mode": "delta", "keep_trace": True})
    assert updated.trigger.mode == "delta" and updated.trigger.keep_trace is True
    assert client.get_mental_model(BANK, "team").content == DOC

    client.retain(BANK, "Bob joined the team.", strategy="verbatim")
    refreshed = client.refresh_mental_model(BANK, "team")
    op = wait_operation(client, refreshed.operation_id)
    assert op.status == "completed" and op.details.outcome == "content_written"
    model = client.get_mental_model(BANK, "team")
    assert model.content == DOC + "\n\n- Bob joined the team."
    trace = model.reflect_response["trace"]
    assert trace["effective_mode"] == "delta"
    assert trace["delta_operations"]["applied"][0]["operation"]["op"] == "append_block"
    assert {e["id"] for e in model.reflect_response["based_on"]["world"]} == {
        str(m.id) for m in MemoryUnit.objects.filter(bank_id=BANK)}  # docs/behaviour.md#cumulative-grounding: accumulated
    stored = MentalModel.objects.get(bank_id=BANK, mental_model_id="team")
    assert render_json(stored.document) == model.content

    client.retain(BANK, "Carol moved to the platform team.", strategy="verbatim")
    preview = client.dry_run_refresh_mental_model(BANK, "team")
    assert preview.requested_mode == "delta" and preview.effective_mode == "delta"
    assert preview.mode_fallback_reason is None
    assert isinstance(preview.delta_operations, MentalModelDeltaOperations)
    assert [a["operation"]["markdown"] for a in preview.delta_operations.applied] == [
        "- Carol moved to the platform team."]
    assert preview.delta_operations.skipped == []
    assert preview.would_persist is True and "+- Carol moved to the platform team." in preview.diff
    assert client.get_mental_model(BANK, "team").content == model.content  # nothing written
