"""The snapshot cutoff and coalescing (docs/behaviour.md): the watermark never passes a memory the refresh did not read.

An automatic refresh that finds its model fresh when it starts completes without reading
anything (no LLM call). Under ``tags_match: "any"`` a refresh would read untagged memories, but
staleness does not count them (the untagged-writes rule), so a fresh model can still have
unread untagged memories in its scope: that run must leave ``last_memory_seen_at`` where it
was, or a later delta window (``updated_at > watermark``) would skip them for good.
"""

from __future__ import annotations

import pytest

from mentalmodels.staleness import is_stale
from tests.factories import make_memory, make_mental_model
from tests.mentalmodels.fenced import refresh_run

pytestmark = pytest.mark.django_db


def test_an_automatic_run_on_a_fresh_model_leaves_the_watermark_before_unread_memories(
    bank, scripted_llm
):
    read = make_memory(bank, "Alice prefers async", tags=["team"])
    model = make_mental_model(bank, "team", content="doc", tags=["team"], trigger={"tags_match": "any"},
                      last_memory_seen_at=read.updated_at)
    unread = make_memory(bank, "An untagged note the model has never read")
    assert not is_stale(model)  # untagged writes never make a tagged model stale

    report = refresh_run(bank_id=bank.id, mental_model_id="team", automatic=True)

    assert scripted_llm.requests == []
    assert report.outcome.outcome == "content_preserved_no_new_facts"
    model.refresh_from_db()
    assert model.last_refreshed_at is not None
    assert model.last_memory_seen_at == read.updated_at < unread.updated_at
