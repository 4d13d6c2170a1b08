"""What a reflect run counts as "returned by a tool" is what the model was actually sent: a
memory the tool's token budget cut from its output is neither read nor citable."""

from __future__ import annotations

import json

import pytest

from fakes.llm_server import Reply
from hindsight.infra.tagscope import TagScope
from mentalmodels.reflect import reflect_run
from tests.mentalmodels.reflect.conftest import add_memory

pytestmark = pytest.mark.django_db


def test_memories_cut_from_a_tool_output_are_not_read_and_cannot_be_cited(bank, scripted_llm):
    memories = [
        add_memory(bank, f"Alice fact {index}: " + "async communication matters " * 12)
        for index in range(12)
    ]
    all_ids = {str(m.id) for m in memories}
    scripted_llm.script(
        Reply.tool_calls([("recall", {"query": "Alice async communication", "max_tokens": 300})]),
        # The model cites every id of the bank, also those it was never shown.
        Reply.tool_calls([("done", {"answer": "Async.", "memory_ids": sorted(all_ids)})]),
    )

    result = reflect_run(bank_id=bank.id, query="How does Alice communicate?",
                         scope=TagScope(fact_types=("world",)), budget="mid")

    sent = json.loads(scripted_llm.requests[1]["messages"][-1]["content"])
    sent_ids = {item["id"] for item in sent["facts"]}
    assert 0 < len(sent_ids) < len(all_ids)
    assert {m.id for m in result.memories_read} == sent_ids
    assert {e["id"] for e in result.based_on["world"]} == sent_ids
    assert result.cited_memory_ids == sent_ids
