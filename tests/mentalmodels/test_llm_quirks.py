"""Retain and refresh against servers and models that answer as real ones do (the quirks of
``fakes.llm_server.Quirks``): on a fresh bank, a sync retain of two facts stores them, the
model's first refresh (full) stores a whole, clean document, and after one more fact a delta
refresh stores it whole and clean again (docs/behaviour.md#whole-answers-only,
docs/behaviour.md#what-a-server-takes, docs/behaviour.md#a-model-without-tools)."""

from __future__ import annotations

import dataclasses

import pytest
from rest_framework.test import APIClient

from fakes.llm_server import Quirks
from fakes.whole_model import document, whole_model
from hindsight.banks.models import MemoryUnit
from hindsight.infra.llm.models import LLMRequest
from mentalmodels.models import MentalModel
from tests.factories import make_mental_model
from tests.mentalmodels.fenced import refresh_run

pytestmark = pytest.mark.django_db

FIRST = ["Alice leads the team.", "Bob writes the docs."]
LATER = "Carol runs the release."

# Each quirk of the table, as the scripted server plays it. A once-only quirk (cut_off,
# broken_tool_arguments) hits the first answer of each step: the retain, each refresh.
QUIRKS = {
    "think_block": Quirks(think=True),
    "think_opened_by_the_template": Quirks(orphan_think=True),
    "json_in_prose": Quirks(prose=True),
    "json_schema_refused": Quirks(refuse_json_schema=True, needs_schema=True),
    "every_response_format_refused": Quirks(refuse_response_format=True, needs_schema=True),
    "response_format_ignored": Quirks(ignore_response_format=True, needs_schema=True),
    "tools_refused": Quirks(refuse_tools=True),
    "cut_off_once": Quirks(cut_off=1),
    "reasoning_content_and_a_fence": Quirks(reasoning_content=True, fence=True),
    "tool_arguments_not_json_once": Quirks(broken_tool_arguments=1),
}


def retain(bank_id: str, text: str) -> None:
    response = APIClient().post(f"/v1/default/banks/{bank_id}/memories",
                                {"items": [{"content": text}]}, format="json")
    assert response.status_code == 200, response.content


@pytest.mark.parametrize("quirk", QUIRKS)
def test_retain_and_refresh_in_full_and_delta_mode_survive(quirk, bank, llm, settings) -> None:
    # The production default: cut-off answers and unreadable tool calls are asked again
    # within this budget.
    settings.HINDSIGHT = dataclasses.replace(settings.HINDSIGHT, llm_max_retries=2)
    whole_model(llm)

    def step() -> None:
        llm.quirks = dataclasses.replace(QUIRKS[quirk])  # once-only quirks count per step

    step()
    retain(bank.id, " ".join(FIRST))
    assert sorted(MemoryUnit.objects.filter(bank_id=bank.id).values_list("text", flat=True)) == FIRST

    model = make_mental_model(bank, "team", trigger={"mode": "delta", "keep_trace": True})
    step()
    report = refresh_run(bank_id=bank.id, mental_model_id="team")
    assert report.plan.effective_mode == "full"
    model.refresh_from_db()
    assert model.content == document(FIRST)
    trace = model.reflect_response["trace"]
    if quirk != "tools_refused":
        # Every forced search ran: an unreadable tool call was not spent as a turn.
        assert [c["tool"] for c in trace["tool_calls"]] == ["search_observations", "recall"]

    step()
    retain(bank.id, LATER)
    report = refresh_run(bank_id=bank.id, mental_model_id="team")
    assert report.plan.effective_mode == "delta" and report.plan.mode_fallback_reason is None
    model = MentalModel.objects.get(pk=model.pk)
    assert model.content == document(FIRST) + "\n\n- " + LATER.rstrip(".")


def test_the_request_log_shows_the_step_a_refusing_server_took(bank, llm) -> None:
    whole_model(llm)
    llm.quirks = Quirks(refuse_json_schema=True)
    retain(bank.id, " ".join(FIRST))
    retain(bank.id, LATER)
    steps = list(LLMRequest.objects.filter(bank_id=bank.id, scope="retain")
                 .order_by("started_at").values_list("structured_step", "status"))
    assert steps == [("json_schema", "error"), ("json_object", "success"),
                     ("json_object", "success")]
