"""The official client's ``reflect`` with every option it offers, against our server."""

from __future__ import annotations

import pytest
from hindsight_client import Hindsight

from hindsight.banks.models import Bank
from tests.fakes.llm_server import Reply
from tests.reflect.conftest import add_memory, add_model

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def _embed_with_scripted_server(openai_embeddings):
    return openai_embeddings


@pytest.fixture
def client(live_server):
    hindsight = Hindsight(base_url=live_server.url, timeout=30.0, max_attempts=1)
    yield hindsight
    hindsight.close()


def test_client_reflect_with_every_option(client, scripted_llm):
    bank = Bank.objects.create(id="compat-options", name="Compat")
    fact = add_memory(bank, "Deploys happen on Fridays", tags=["ops"])
    add_memory(bank, "Deploys are risky", tags=["ops"], fact_type="observation")
    add_model(bank, "deploys", name="Deploys", content="Fridays.", tags=["ops"])
    scripted_llm.script(
        Reply.tool_calls([("recall", {"query": "deploys"})]),
        Reply.tool_calls([("done", {"answer": "Fridays.", "memory_ids": [str(fact.id)]})]),
    )

    response = client.reflect(
        "compat-options", "When are deploys?", budget="high", context="release planning",
        max_tokens=1024, tag_groups=[{"or": [{"tags": ["ops"]}, {"tags": ["dev"]}]}],
        include_facts=True, include_tool_calls=True, include_tool_call_output=False,
        apply_all_directives=True, fact_types=["world"], exclude_mental_models=True,
        reflect_search_observations_max_tokens=500,
        reflect_search_observations_include_entities=False,
    )

    assert response.text == "Fridays."
    assert [m.id for m in response.based_on.memories] == [str(fact.id)]
    assert response.based_on.mental_models == []
    assert [c.tool for c in response.trace.tool_calls] == ["recall"]
    assert response.trace.tool_calls[0].output is None
    first = scripted_llm.requests[0]
    # fact_types=[world] leaves recall only; exclude_mental_models removes the model search.
    assert [t["function"]["name"] for t in first["tools"]] == ["recall", "done"]
    assert "release planning" in first["messages"][-1]["content"]
    assert first.get("max_completion_tokens", first.get("max_tokens")) == 1024
