"""A dry run on a server without an LLM is the configuration error reflect answers (400)."""

from __future__ import annotations

import dataclasses

import pytest

from tests.factories import make_memory, make_mental_model


@pytest.fixture
def no_llm(settings) -> None:
    settings.HINDSIGHT = dataclasses.replace(settings.HINDSIGHT, llm_provider="none")


def test_dry_run_without_an_llm_is_a_400_naming_the_setting_not_a_502(api, bank, no_llm):
    # Found by tests/test_schemathesis.py: the missing LLM surfaced as "a refresh would fail" 502.
    make_memory(bank, "Alice leads the platform team.", embed=True)
    model = make_mental_model(bank, "team", content="doc")
    response = api.post(f"/v1/default/banks/{bank.id}/mental-models/team/dry-run-refresh")
    assert response.status_code == 400
    assert "HINDSIGHT_API_LLM_PROVIDER" in response.json()["detail"]
    reflect = api.post(f"/v1/default/banks/{bank.id}/reflect", {"query": "who leads?"},
                       format="json")
    assert (reflect.status_code, reflect.json()) == (400, response.json())
    model.refresh_from_db()
    assert model.content == "doc"
