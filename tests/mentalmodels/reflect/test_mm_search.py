"""Mental-model search (seed 004): visibility, lazy re-embedding, ranking, lexical fallback."""

from __future__ import annotations

import re

import pytest

from hindsight.infra.tagscope import TagScope
from mentalmodels.models import MentalModel
from mentalmodels.reflect.mm_search import (
    content_hash,
    embedding_text,
    mental_models_search,
    visible_models,
)
from tests.mentalmodels.reflect.conftest import add_model

pytestmark = pytest.mark.django_db


def _texts(requests: list[dict]) -> list[list[str]]:
    return [r["input"] if isinstance(r["input"], list) else [r["input"]] for r in requests]


@pytest.fixture
def three_models(bank):
    return [
        add_model(bank, "coffee", name="Coffee habits",
                  content="The team drinks espresso coffee every morning."),
        add_model(bank, "deploys", name="Deploy process",
                  content="Deploys run through the release pipeline on Fridays."),
        add_model(bank, "comms", name="Team communication",
                  content="The team communicates on Slack, async first."),
    ]


def test_models_rank_by_embedding_similarity_to_the_query(bank, three_models):
    search = mental_models_search(
        bank_id=bank.id, query="release pipeline deploys on Fridays", scope=TagScope()
    )

    assert search.semantic is True
    ids = [r.model.mental_model_id for r in search.ranked]
    assert ids[0] == "deploys"
    relevances = [r.relevance for r in search.ranked]
    assert all(r is not None for r in relevances)
    assert relevances == sorted(relevances, reverse=True)


def test_ranking_is_capped_at_the_limit(bank, three_models):
    search = mental_models_search(bank_id=bank.id, query="team", scope=TagScope(), limit=2)
    assert len(search.ranked) == 2


def test_embeddings_are_computed_lazily_once_and_stored(bank, three_models, openai_embeddings):
    assert all(m.embedding is None for m in three_models)

    first = mental_models_search(bank_id=bank.id, query="coffee", scope=TagScope())
    second = mental_models_search(bank_id=bank.id, query="slack", scope=TagScope())

    # One embedder request per search: the query plus the stragglers, then the query alone.
    assert [len(t) for t in _texts(openai_embeddings.embedding_requests)] == [4, 1]
    assert first.reembedded == 3 and second.reembedded == 0
    for model in MentalModel.objects.filter(bank=bank):
        assert model.embedding is not None
        assert model.embedding_content_hash == content_hash(embedding_text(model))
        assert model.embedding_model == "scripted-embed"
        assert model.embedding_dimensions == 384


def test_changed_content_re_embeds_only_that_model(bank, three_models, openai_embeddings):
    mental_models_search(bank_id=bank.id, query="coffee", scope=TagScope())
    MentalModel.objects.filter(mental_model_id="coffee").update(content="Tea, not coffee, now.")
    openai_embeddings.embedding_requests.clear()

    search = mental_models_search(bank_id=bank.id, query="tea", scope=TagScope())

    [texts] = _texts(openai_embeddings.embedding_requests)
    assert texts == ["tea", "Coffee habits\n\nTea, not coffee, now."]
    assert search.reembedded == 1
    coffee = MentalModel.objects.get(mental_model_id="coffee")
    assert coffee.embedding_content_hash == content_hash(embedding_text(coffee))


def test_a_changed_embedding_model_re_embeds_every_model(bank, three_models, openai_embeddings):
    mental_models_search(bank_id=bank.id, query="coffee", scope=TagScope())
    MentalModel.objects.filter(bank=bank).update(embedding_model="old-model")
    openai_embeddings.embedding_requests.clear()

    search = mental_models_search(bank_id=bank.id, query="coffee", scope=TagScope())

    assert search.reembedded == 3
    assert set(MentalModel.objects.values_list("embedding_model", flat=True)) == {"scripted-embed"}


def test_empty_models_are_not_embedded_and_rank_last(bank, three_models, openai_embeddings):
    add_model(bank, "blank", name="Coffee blank", content="")

    search = mental_models_search(bank_id=bank.id, query="coffee", scope=TagScope())

    assert search.ranked[-1].model.mental_model_id == "blank"
    assert search.ranked[-1].relevance is None
    assert "Coffee blank" not in str(openai_embeddings.embedding_requests)


def test_blank_query_falls_back_to_lexical_without_relevance(bank, three_models,
                                                               openai_embeddings):
    search = mental_models_search(bank_id=bank.id, query="   ", scope=TagScope())

    assert search.semantic is False
    assert len(search.ranked) == 3
    assert all(r.relevance is None for r in search.ranked)
    assert openai_embeddings.embedding_requests == []


def test_embedder_failure_falls_back_to_lexical_ranking(bank, three_models, openai_embeddings):
    openai_embeddings.fail_embeddings(5)

    search = mental_models_search(bank_id=bank.id, query="Slack communication", scope=TagScope())

    assert search.semantic is False
    assert search.ranked[0].model.mental_model_id == "comms"
    assert all(r.relevance is None for r in search.ranked)
    assert any("lexical" in w for w in search.warnings)


def _visible(bank, scope, exclude=()) -> set[str]:
    return set(
        visible_models(bank_id=bank.id, scope=scope, exclude_ids=exclude).values_list(
            "mental_model_id", flat=True
        )
    )


def test_tagged_reflect_sees_only_models_whose_tags_overlap(bank):
    add_model(bank, "untagged", name="U", content="u")
    add_model(bank, "alice", name="A", content="a", tags=["user:alice"])
    add_model(bank, "alice-team", name="AT", content="at", tags=["user:alice", "team"])
    add_model(bank, "bob", name="B", content="b", tags=["user:bob"])

    assert _visible(bank, TagScope()) == {"untagged", "alice", "alice-team", "bob"}
    assert _visible(bank, TagScope(tags=("user:alice",))) == {"alice", "alice-team"}
    assert _visible(bank, TagScope(tags=("team", "user:bob"), tags_match="all_strict")) == {
        "alice-team", "bob",
    }
    assert _visible(bank, TagScope(tags=(), tags_match="exact")) == {"untagged"}
    assert _visible(bank, TagScope(), exclude=["bob", "untagged"]) == {"alice", "alice-team"}


def test_tag_groups_decide_model_visibility(bank):
    add_model(bank, "untagged", name="U", content="u")
    add_model(bank, "alice", name="A", content="a", tags=["user:alice"])
    add_model(bank, "alice-team", name="AT", content="at", tags=["user:alice", "team"])
    scope = TagScope.parse(tag_groups=[{"tags": ["user:alice"]},
                                       {"not": {"tags": ["team"]}}])

    assert _visible(bank, scope) == {"alice"}


def _vector_reads(queries: list[dict]) -> int:
    """Statements that read the stored vectors themselves (not their digest)."""
    return sum(1 for q in queries
               if '"embedding"' in re.sub(r"vector_send\([^)]*\)", "", q["sql"].split(" FROM ")[0]))


def test_a_process_parses_each_stored_vector_once_with_the_same_relevance(
        bank, three_models, openai_embeddings):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from mentalmodels.reflect import mm_search

    mental_models_search(bank_id=bank.id, query="coffee", scope=TagScope())  # embeds all three
    mm_search._vectors.clear()
    with CaptureQueriesContext(connection) as first_reads:
        first = mental_models_search(bank_id=bank.id, query="slack", scope=TagScope())
    with CaptureQueriesContext(connection) as second_reads:
        second = mental_models_search(bank_id=bank.id, query="slack", scope=TagScope())

    assert _vector_reads(first_reads.captured_queries) == 1  # the three, in one statement
    assert _vector_reads(second_reads.captured_queries) == 0  # from the process's cache
    ranking = [(r.model.mental_model_id, r.relevance) for r in first.ranked]
    assert [(r.model.mental_model_id, r.relevance) for r in second.ranked] == ranking
    assert all(relevance is not None for _, relevance in ranking)


def test_a_vector_changed_in_the_database_is_read_again_not_served_from_the_cache(
        bank, three_models, openai_embeddings):
    mental_models_search(bank_id=bank.id, query="coffee", scope=TagScope())
    before = mental_models_search(bank_id=bank.id, query="coffee", scope=TagScope())
    assert before.ranked[0].model.mental_model_id == "coffee"
    # The same text hash and profile, another vector (stored behind the search's back): the
    # digest of the stored bytes changed, so the cached array is not used.
    comms = MentalModel.objects.get(mental_model_id="comms")
    coffee = MentalModel.objects.get(mental_model_id="coffee")
    MentalModel.objects.filter(uid=comms.uid).update(embedding=list(coffee.embedding))

    after = mental_models_search(bank_id=bank.id, query="coffee", scope=TagScope())

    relevance = {r.model.mental_model_id: r.relevance for r in after.ranked}
    assert relevance["comms"] == relevance["coffee"]


def test_the_search_reads_only_what_ranking_and_the_tool_entries_need(
        bank, three_models, openai_embeddings):
    """Every visible model is read at every search (every refresh of a bank): its bookkeeping
    columns (failures, cron, timestamps) and its stored answer stay unread, and the tool's
    entries (staleness included) read nothing more of any model afterwards."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from mentalmodels.reflect.tools import SEARCH_MENTAL_MODELS, ToolBox

    mental_models_search(bank_id=bank.id, query="coffee", scope=TagScope())  # embeds all three
    box = ToolBox(bank_id=bank.id, query="team", scope=TagScope())
    with CaptureQueriesContext(connection) as three:
        outcome = box.run(SEARCH_MENTAL_MODELS, {"query": "team"}, allowed=[SEARCH_MENTAL_MODELS])
    assert outcome.result_count == 3
    [search] = [q["sql"] for q in three.captured_queries if "AS \"vector_digest\"" in q["sql"]]
    for column in ("reflect_response", "document", "refresh_failure_streak", "cron_checked_at",
                   "awaiting_llm_since", "created_at", "max_tokens"):
        assert f'"{column}"' not in search.split(" FROM ")[0], column
    for n in range(3):
        add_model(bank, f"more-{n}", name=f"More {n}", content=f"The team also does thing {n}.")
    mental_models_search(bank_id=bank.id, query="coffee", scope=TagScope())  # embeds the new
    with CaptureQueriesContext(connection) as six:
        outcome = box.run(SEARCH_MENTAL_MODELS, {"query": "team"}, allowed=[SEARCH_MENTAL_MODELS])
    assert outcome.result_count == 5  # the default limit
    assert len(six.captured_queries) == len(three.captured_queries)  # nothing read per model
