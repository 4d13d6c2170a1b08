"""Every LLM call carries its bank: retain, consolidation, a full and a delta refresh and reflect,
run against the scripted LLM, leave no ``/metrics`` sample and no request-log row without a bank,
and their tokens are charged to the bank's budget."""

from __future__ import annotations

from typing import Any

import pytest
from django.utils import timezone
from prometheus_client import REGISTRY
from rest_framework.test import APIClient

from fakes.consolidation_llm import ConsolidatingLLM
from fakes.delta_llm import append_each_fact, is_delta_call, parse_delta_call
from fakes.llm_server import Reply
from hindsight.banks.budget import bank_spend
from hindsight.infra.llm.models import LLMRequest
from mentalmodels.models import MentalModel
from operations.engine import operation_execute
from operations.models import Operation
from tests.factories import make_mental_model

pytestmark = pytest.mark.django_db

BANK = "every-call-bank"
API = f"/v1/default/banks/{BANK}"
# The gateway's metric families, as /metrics names their samples.
LLM_SAMPLES = ("hindsight_llm_requests_total", "hindsight_llm_input_tokens_total",
               "hindsight_llm_output_tokens_total")


def llm_samples() -> dict[tuple[str, str, str], float]:
    """``{(sample, bank, purpose): value}`` of the gateway's counters, as /metrics has them
    (requests summed over status)."""
    out: dict[tuple[str, str, str], float] = {}
    for family in REGISTRY.collect():
        for sample in family.samples:
            if sample.name in LLM_SAMPLES:
                key = (sample.name, sample.labels["bank"], sample.labels["purpose"])
                out[key] = out.get(key, 0.0) + sample.value
    return out


def grown(before: dict[Any, float], after: dict[Any, float]) -> dict[Any, float]:
    return {key: value - before.get(key, 0.0) for key, value in after.items()
            if value > before.get(key, 0.0)}


def scripted(llm: Any) -> None:
    """Extraction, consolidation and reflect as ``ConsolidatingLLM`` answers them; a delta
    refresh's edit call appends each new fact to the document's first section."""
    consolidating = ConsolidatingLLM(llm)

    def respond(body: dict[str, Any]) -> Reply:
        if is_delta_call(body):
            call = parse_delta_call(body)
            return Reply.json({"operations": append_each_fact(call.outline[0]["section_id"])(call)},
                              usage={"prompt_tokens": 7, "completion_tokens": 3})
        return consolidating.respond(body)

    llm.respond_with(respond)


def refresh() -> Operation:
    """A manual refresh of the model, run by the engine as a worker runs it."""
    response = APIClient().post(f"{API}/mental-models/team/refresh", format="json")
    assert response.status_code == 200, response.content
    operation_id = response.json()["operation_id"]
    assert operation_execute(operation_id=operation_id, holder="test") == "completed"
    return Operation.objects.get(id=operation_id)


def test_retain_consolidation_refreshes_and_reflect_count_every_call_under_its_bank(llm):
    scripted(llm)
    client = APIClient()
    started = timezone.now()
    before = llm_samples()

    retained = client.post(f"{API}/memories", {"items": [{"content": "Alice runs the team"}]},
                           format="json")
    assert retained.status_code == 200, retained.content
    consolidation = Operation.objects.get(bank_id=BANK, operation_type="consolidation")
    assert operation_execute(operation_id=str(consolidation.id), holder="test") == "completed"
    make_mental_model(BANK, "team", trigger={"mode": "delta"})
    full = refresh()  # no content yet: a full refresh
    assert full.result_metadata["delta_ops_applied"] in (None, 0), full.result_metadata
    second = client.post(f"{API}/memories", {"items": [{"content": "Bob joined the team"}]},
                         format="json")
    assert second.status_code == 200, second.content
    delta = refresh()
    assert delta.result_metadata["delta_ops_applied"] == 1, delta.result_metadata
    assert "Bob joined the team" in MentalModel.objects.get(bank_id=BANK,
                                                            mental_model_id="team").content
    reflected = client.post(f"{API}/reflect", {"query": "Who runs the team?"}, format="json")
    assert reflected.status_code == 200, reflected.content

    counted = grown(before, llm_samples())
    purposes = {purpose for (_, bank, purpose) in counted if bank == BANK}
    # Each kind of call ran and was counted (the guard would pass on nothing otherwise).
    assert {"retain", "consolidation", "mental_model_delta"} <= purposes, purposes
    assert any(p.startswith("reflect:") for p in purposes), purposes
    assert {bank for (_, bank, _) in counted} == {BANK}, counted  # no sample with bank=""

    # The request log and so the budget charge the bank for every request.
    logged = LLMRequest.objects.filter(started_at__gte=started)
    assert logged.count() == len(llm.requests)
    assert set(logged.values_list("bank_id", flat=True)) == {BANK}, list(logged.filter(bank_id__isnull=True).values("scope", "operation", "operation_id", "status"))
    tokens = sum(r.input_tokens + r.output_tokens for r in logged)
    assert tokens > 0 and bank_spend(bank_id=BANK).spent == tokens
