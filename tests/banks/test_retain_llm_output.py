"""Retain with an LLM: what the model extracts is stored safely, whatever characters it sends."""

from __future__ import annotations

from typing import Any

import pytest
from rest_framework.test import APIClient

from fakes.llm_server import Reply
from hindsight.banks.models import MemoryUnit

pytestmark = pytest.mark.django_db


def test_nul_characters_in_extracted_facts_are_dropped_not_a_500(scripted_llm: Any) -> None:
    scripted_llm.script(Reply.json({"facts": [
        {"text": "Alice\u0000 likes tea.", "fact_type": "world",
         "occurred_start": None, "occurred_end": None},
        {"text": "\u0000", "fact_type": "world", "occurred_start": None, "occurred_end": None},
    ]}))
    response = APIClient(raise_request_exception=False).post(
        "/v1/default/banks/nul/memories", {"items": [{"content": "Alice likes tea."}]},
        format="json")
    assert response.status_code == 200, response.content
    assert list(MemoryUnit.objects.filter(bank_id="nul").values_list("text", flat=True)) == [
        "Alice likes tea."]
