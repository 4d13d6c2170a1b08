"""Memory curation reaches the pages (docs/behaviour.md#memory-curation,
docs/behaviour.md#staleness): after an edit, an invalidation, a restore or a deletion of a
memory, a mental model whose scope held it reads stale, one whose scope did not stays fresh,
and the next refresh takes the change in (its watermark moves past it). Bad requests are 4xx
naming the field, and change nothing."""

from __future__ import annotations

import pytest
from django.db import transaction

from fakes.llm_server import Reply
from hindsight.banks import curation
from hindsight.banks.documents import document_delete, document_update
from hindsight.banks.models import InvalidatedMemoryUnit, MemoryChange, MemoryUnit
from hindsight.banks.retaintypes import RetainItem
from hindsight.banks.services import memories_retain
from hindsight.banks.writeclock import hold_bank_write_lock
from mentalmodels.models import MentalModel
from mentalmodels.staleness import is_stale, stale_flags
from tests.factories import make_memory, make_mental_model
from tests.mentalmodels.fenced import refresh_run

pytestmark = pytest.mark.django_db


@pytest.fixture
def pages(bank, openai_embeddings):
    """A fact tagged ops; a page of ops and one of hr, both fresh (they read everything)."""
    fact = make_memory(bank, "The deploy server is db-1.", tags=["ops"], embed=True)
    hr_fact = make_memory(bank, "Holidays are in August.", tags=["hr"], embed=True)
    ops = make_mental_model(bank, "ops", tags=["ops"], content="## Ops\n\ndb-1",
                            last_memory_seen_at=fact.updated_at)
    hr = make_mental_model(bank, "hr", tags=["hr"], content="## HR\n\nAugust",
                           last_memory_seen_at=hr_fact.updated_at)
    everything = make_mental_model(bank, "all", content="## All",
                                   last_memory_seen_at=hr_fact.updated_at)
    assert not any(stale_flags([ops, hr, everything]).values())
    return fact, ops, hr, everything


def _stale(*models: MentalModel) -> list[bool]:
    for model in models:
        model.refresh_from_db()
    flags = stale_flags(models)
    return [flags[m.uid] for m in models]


def test_an_edit_makes_the_pages_that_held_the_memory_stale(bank, pages, openai_embeddings):
    fact, ops, hr, everything = pages
    curation.memory_update(bank_id=bank.id, memory_id=str(fact.id),
                           edits={"text": "The deploy server is db-2."})
    assert _stale(ops, hr, everything) == [True, False, True]


def test_a_retag_makes_the_page_of_the_old_tags_stale_too(bank, pages):
    fact, ops, hr, everything = pages
    curation.memory_update(bank_id=bank.id, memory_id=str(fact.id), edits={"tags": ["hr"]})
    # The ops page held the memory (the change row says so); the hr page holds it now.
    assert _stale(ops, hr, everything) == [True, True, True]


def test_an_invalidation_makes_the_page_stale_and_the_memory_leaves_its_scope(bank, pages):
    fact, ops, hr, everything = pages
    curation.memory_update(bank_id=bank.id, memory_id=str(fact.id), edits={},
                           state="invalidated", reason="decommissioned")
    assert _stale(ops, hr, everything) == [True, False, True]
    assert not MemoryUnit.objects.filter(id=fact.id).exists()
    assert InvalidatedMemoryUnit.objects.get(id=fact.id).invalidation_reason == "decommissioned"


def test_a_restore_makes_the_page_stale_again_and_keeps_the_id(bank, pages, openai_embeddings):
    fact, ops, hr, everything = pages
    curation.memory_update(bank_id=bank.id, memory_id=str(fact.id), edits={},
                           state="invalidated")
    changed = MemoryChange.objects.get(memory_id=fact.id).changed_at
    MentalModel.objects.filter(uid=ops.uid).update(last_memory_seen_at=changed)
    assert _stale(ops) == [False]
    curation.memory_update(bank_id=bank.id, memory_id=str(fact.id), edits={}, state="valid")
    assert _stale(ops, hr) == [True, False]
    restored = MemoryUnit.objects.get(id=fact.id)
    assert restored.text == "The deploy server is db-1." and restored.embedding is not None


def test_deleting_a_memorys_observations_makes_the_observation_pages_stale(bank, pages):
    fact, ops, hr, everything = pages
    observation = make_memory(bank, "Ops runs db-1.", tags=["ops"], fact_type="observation",
                              source_memory_ids=[fact.id])
    MentalModel.objects.filter(uid__in=[ops.uid, hr.uid, everything.uid]).update(
        last_memory_seen_at=observation.updated_at)
    assert _stale(ops, hr, everything) == [False, False, False]
    assert curation.memory_observations_clear(bank_id=bank.id, memory_id=str(fact.id)) == 1
    assert _stale(ops, hr, everything) == [True, False, True]


def test_a_change_outside_every_scope_leaves_the_pages_fresh(bank, pages):
    fact, ops, hr, everything = pages
    other = make_memory(bank, "Cats sleep a lot.", tags=["cats"])
    MentalModel.objects.filter(uid__in=[ops.uid, hr.uid]).update(
        last_memory_seen_at=other.updated_at)
    curation.memory_update(bank_id=bank.id, memory_id=str(other.id), edits={},
                           state="invalidated")
    assert _stale(ops, hr) == [False, False]


def test_the_next_refresh_takes_the_invalidation_in(bank, pages, scripted_llm, openai_embeddings):
    fact, ops, hr, everything = pages
    kept = make_memory(bank, "The backup server is db-9.", tags=["ops"], embed=True)
    MentalModel.objects.filter(uid=ops.uid).update(last_memory_seen_at=kept.updated_at)
    curation.memory_update(bank_id=bank.id, memory_id=str(fact.id), edits={},
                           state="invalidated")
    assert is_stale(MentalModel.objects.get(uid=ops.uid))
    seen: list[str] = []

    def respond(body: dict) -> Reply:
        seen.extend(m.get("content") or "" for m in body["messages"] if m["role"] == "tool")
        choice = body.get("tool_choice")
        if isinstance(choice, dict):
            return Reply.tool_calls([(choice["function"]["name"], {"query": "server"})])
        return Reply.tool_calls([("done", {"answer": "## Ops\n\nBackups on db-9.",
                                           "memory_ids": [str(kept.id)],
                                           "mental_model_ids": []})])

    scripted_llm.respond_with(respond)
    report = refresh_run(bank_id=bank.id, mental_model_id="ops")

    assert report.outcome.outcome == "content_written"
    assert not any("db-1" in text for text in seen)  # the archived memory is never read
    model = MentalModel.objects.get(uid=ops.uid)
    change = MemoryChange.objects.get(memory_id=fact.id)
    assert model.last_memory_seen_at == change.changed_at
    assert not is_stale(model)


def test_a_change_stamp_is_taken_under_the_banks_write_lock(bank, pages):
    """The change row's clock is the write stamp, so a refresh cutoff taken before it commits
    is earlier (docs/behaviour.md#the-snapshot-cutoff)."""
    fact, *_ = pages
    with transaction.atomic():
        before = hold_bank_write_lock(bank.id)
    curation.memory_update(bank_id=bank.id, memory_id=str(fact.id), edits={},
                           state="invalidated")
    assert MemoryChange.objects.get(memory_id=fact.id).changed_at > before


# --- bad requests: a 4xx naming the field, nothing changed -----------------------------------


@pytest.mark.parametrize(("body", "field"), [
    ({}, None),
    ({"state": "gone"}, "state"),
    ({"mentioned_at": "yesterday"}, "mentioned_at"),
    ({"text": ""}, "text"),
    ({"tags": "ops"}, "tags"),
    ({"fact_type": "observation"}, "fact_type"),
    ({"surprise": 1}, "surprise"),
])
def test_a_malformed_update_is_a_422_naming_the_field(api, bank, pages, body, field):
    fact, *_ = pages
    response = api.patch(f"/v1/default/banks/{bank.id}/memories/{fact.id}", body, format="json")
    assert response.status_code == 422, response.content
    locs = [e["loc"] for e in response.json()["detail"]]
    assert any(loc[-1] == field for loc in locs) if field else locs == [["body"]]
    assert MemoryUnit.objects.get(id=fact.id).text == "The deploy server is db-1."
    assert not MemoryChange.objects.exists()


def test_an_unknown_or_malformed_memory_id_is_a_404_or_400(api, bank):
    base = f"/v1/default/banks/{bank.id}/memories"
    missing = "00000000-0000-0000-0000-000000000000"
    assert api.get(f"{base}/{missing}").status_code == 404
    assert api.patch(f"{base}/{missing}", {"state": "invalidated"},
                     format="json").status_code == 404
    assert api.get(f"{base}/{missing}/history").status_code == 404
    assert api.delete(f"{base}/{missing}/observations").status_code == 404
    assert api.get(f"{base}/nope").status_code == 400
    assert api.get("/v1/default/banks/no-such-bank/memories/" + missing).status_code == 404
    assert api.delete("/v1/default/banks/no-such-bank/observations").status_code == 404


# --- a document's changes reach the pages too ---------------------------------------------------


@pytest.fixture
def document_pages(bank, openai_embeddings):
    """A document of two ops facts (retained through the service, so it has its row) and the
    pages of ops and of hr, fresh."""
    memories_retain(bank_id=bank.id, items=[
        RetainItem(content="The deploy server is db-1.", tags=["ops"], document_id="runbook",
                   strategy="verbatim"),
        RetainItem(content="Backups run nightly.", tags=["ops"], document_id="runbook",
                   strategy="verbatim", update_mode="append")])
    hr_fact = make_memory(bank, "Holidays are in August.", tags=["hr"])
    ops = make_mental_model(bank, "ops", tags=["ops"], content="## Ops",
                            last_memory_seen_at=hr_fact.updated_at)
    hr = make_mental_model(bank, "hr", tags=["hr"], content="## HR",
                           last_memory_seen_at=hr_fact.updated_at)
    assert _stale(ops, hr) == [False, False]
    return ops, hr


def test_deleting_a_document_makes_the_pages_that_held_its_memories_stale(bank, document_pages):
    ops, hr = document_pages
    assert document_delete(bank_id=bank.id, document_id="runbook") == 2
    assert _stale(ops, hr) == [True, False]
    assert not MemoryUnit.objects.filter(bank_id=bank.id, document_id="runbook").exists()


def test_retagging_a_document_makes_the_pages_of_its_old_and_new_tags_stale(bank,
                                                                          document_pages):
    ops, hr = document_pages
    document_update(bank_id=bank.id, document_id="runbook", tags=["hr"])
    assert _stale(ops, hr) == [True, True]


def test_re_sending_a_document_records_the_facts_it_replaced(bank, document_pages):
    ops, hr = document_pages
    memories_retain(bank_id=bank.id, items=[
        RetainItem(content="Ops moved to Lisbon.", tags=["hr"], document_id="runbook",
                   strategy="verbatim")])
    # The replaced facts were ops facts: the ops page reads stale though nothing new is ops.
    assert _stale(ops, hr) == [True, True]
    assert MemoryChange.objects.filter(bank_id=bank.id, document_id="runbook",
                                       kind="fact_deleted").count() == 2


def test_clearing_the_banks_memories_makes_every_page_that_held_one_stale(bank, pages):
    fact, ops, hr, everything = pages
    assert curation.bank_memories_clear(bank_id=bank.id, fact_type="observation") == 0
    assert _stale(ops, hr, everything) == [False, False, False]
    assert curation.bank_memories_clear(bank_id=bank.id) == 2
    assert _stale(ops, hr, everything) == [True, True, True]


def test_a_page_never_refreshed_reads_only_its_scopes_memories_not_their_changes(bank, pages):
    fact, *_ = pages
    never = make_mental_model(bank, "never", tags=["ops"])
    assert _stale(never) == [True]  # its scope holds a memory
    curation.memory_update(bank_id=bank.id, memory_id=str(fact.id), edits={},
                           state="invalidated")
    # Nothing was read, so nothing can be taken back: the scope, now empty, decides.
    assert _stale(never) == [False]
