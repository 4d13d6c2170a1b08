"""A directive change makes the pages it applies to stale
(docs/behaviour.md#a-directive-change-makes-its-pages-stale): through the one staleness rule,
by the directive's tags, until the page's next refresh, which runs in full mode."""

from __future__ import annotations

import pytest

from mentalmodels.directives.models import DirectiveScopeStamp
from mentalmodels.directives.services import directive_create, directive_delete, directive_update
from mentalmodels.knowledge.selectors import knowledge_tree_version
from mentalmodels.knowledge.services import knowledge_page_create
from mentalmodels.refresh.pipeline import DIRECTIVES_CHANGED
from mentalmodels.staleness import stale_flags
from tests.factories import make_memory, make_mental_model
from tests.mentalmodels.fenced import refresh_run
from tests.mentalmodels.test_pipeline import answer_with

pytestmark = pytest.mark.django_db


def stale(*models) -> list[bool]:
    for model in models:
        model.refresh_from_db()
    flags = stale_flags(models)
    return [flags[m.uid] for m in models]


@pytest.fixture
def pages(bank):
    make_memory(bank, "Alice leads the team", tags=["team"])
    team = make_mental_model(bank, "team", tags=["team"], fresh=True)
    cats = make_mental_model(bank, "cats", tags=["cats"], fresh=True)
    everything = make_mental_model(bank, "all", fresh=True)
    assert stale(team, cats, everything) == [False, False, False]
    return team, cats, everything


def test_an_untagged_directive_makes_every_page_stale(bank, pages):
    directive_create(bank_id=bank.id, name="Formal", content="Answer formally.")
    assert stale(*pages) == [True, True, True]


def test_a_tagged_directive_makes_only_the_pages_it_applies_to_stale(bank, pages):
    directive_create(bank_id=bank.id, name="Team", content="Name the lead.", tags=["team"])
    # The untagged page reads the whole bank, but a tagged directive never applies to it.
    assert stale(*pages) == [True, False, False]


def test_an_inactive_directive_changes_no_page_until_it_is_activated(bank, pages):
    directive = directive_create(bank_id=bank.id, name="Off", content="x", is_active=False)
    directive_update(bank_id=bank.id, directive_id=str(directive.id), content="y")
    assert stale(*pages) == [False, False, False]
    directive_update(bank_id=bank.id, directive_id=str(directive.id), is_active=True)
    assert stale(*pages) == [True, True, True]


def test_an_edit_that_changes_nothing_stamps_nothing(bank, pages):
    directive = directive_create(bank_id=bank.id, name="T", content="x", tags=["team"],
                                 mark_pages_stale=False)
    directive_update(bank_id=bank.id, directive_id=str(directive.id), content="x", tags=["team"])
    assert stale(*pages) == [False, False, False]


def test_moving_a_directive_between_tags_stales_the_pages_of_both(bank, pages):
    directive = directive_create(bank_id=bank.id, name="T", content="x", tags=["team"],
                                 mark_pages_stale=False)
    directive_update(bank_id=bank.id, directive_id=str(directive.id), tags=["cats"])
    assert stale(*pages) == [True, True, False]


@pytest.mark.parametrize("active", [True, False])
def test_deleting_an_active_directive_stales_its_pages_an_inactive_one_not(bank, pages, active):
    directive = directive_create(bank_id=bank.id, name="T", content="x", tags=["team"],
                                 is_active=active, mark_pages_stale=False)
    directive_delete(bank_id=bank.id, directive_id=str(directive.id))
    assert stale(*pages) == [active, False, False]


def test_a_restored_directive_leaves_the_pages_fresh(bank, pages):
    directive_create(bank_id=bank.id, name="Formal", content="x", mark_pages_stale=False)
    assert stale(*pages) == [False, False, False]
    assert not DirectiveScopeStamp.objects.exists()


def test_the_next_refresh_makes_the_page_fresh_again(bank, scripted_llm, openai_embeddings):
    fact = make_memory(bank, "Alice leads the team", embed=True)
    model = make_mental_model(bank, "all", fresh=True)
    directive_create(bank_id=bank.id, name="Formal", content="Answer formally.")
    assert stale(model) == [True]
    answer_with(scripted_llm, "Alice leads the team.", [str(fact.id)])
    refresh_run(bank_id=bank.id, mental_model_id="all", automatic=True)
    assert scripted_llm.requests  # the automatic run did not skip it as fresh
    assert stale(model) == [False]


def test_a_delta_page_stale_for_a_directive_runs_in_full_mode(bank, scripted_llm,
                                                             openai_embeddings):
    fact = make_memory(bank, "Alice leads the team", embed=True)
    make_mental_model(bank, "team", content="## Team\n\nAlice leads.", fresh=True,
                      trigger={"mode": "delta"})
    directive_create(bank_id=bank.id, name="Formal", content="Answer formally.")
    answer_with(scripted_llm, "## Team\n\nAlice leads the team, formally.", [str(fact.id)])
    report = refresh_run(bank_id=bank.id, mental_model_id="team")
    assert (report.plan.requested_mode, report.plan.effective_mode) == ("delta", "full")
    assert report.plan.mode_fallback_reason is None
    assert DIRECTIVES_CHANGED in report.warnings
    assert report.outcome.content == "## Team\n\nAlice leads the team, formally."
    # Refreshed: the next delta refresh is a delta again.
    report = refresh_run(bank_id=bank.id, mental_model_id="team")
    assert report.plan.effective_mode == "delta"


def test_a_directive_change_moves_the_knowledge_trees_version(bank):
    knowledge_page_create(bank_id=bank.id, name="Team", source_query="Who leads?")
    before = knowledge_tree_version(bank_id=bank.id).version
    directive_create(bank_id=bank.id, name="Formal", content="x")
    assert knowledge_tree_version(bank_id=bank.id).version != before
