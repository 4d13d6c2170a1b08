"""The official hindsight-client 1.1.0 against our server (live_server): banks, retain, recall.

Asserts the returned facts, not only status codes: every tags_match mode selects exactly the
memories the tag-matching rules say it does.
"""

from __future__ import annotations

import pytest
from hindsight_client import Hindsight

from hindsight.banks.models import MemoryUnit

pytestmark = pytest.mark.django_db(transaction=True)

ALICE = "Alice prefers async communication over Slack."
BOB = "Bob likes morning meetings with the whole team."
POLICY = "Company policy: no meetings on Fridays."
CAROL = "Carol's cat is called Miso."


@pytest.fixture
def seeded(client: Hindsight) -> str:
    bank = "compat-banks"
    profile = client.create_bank(bank, name="Compat", mission="Track team preferences")
    assert profile.bank_id == bank and profile.name == "Compat"
    assert profile.mission == "Track team preferences"
    assert profile.disposition.skepticism == 3

    one = client.retain(bank, ALICE, context="team chat", tags=["team", "alice"])
    assert one.success is True and one.items_count == 1 and one.var_async is False
    batch = client.retain_batch(
        bank,
        [
            {"content": BOB, "tags": ["team"], "timestamp": "2026-01-05T09:00:00Z"},
            {"content": POLICY},
            {"content": CAROL, "tags": ["carol"], "metadata": {"source": "hr"}},
        ],
        document_id="handbook",
    )
    assert batch.success is True and batch.items_count == 3
    return bank


def _recall(client: Hindsight, bank: str, tags: list[str] | None, mode: str) -> set[str]:
    response = client.recall(bank, "meetings and communication preferences", tags=tags,
                             tags_match=mode, max_tokens=4096)
    return {r.text for r in response.results}


def test_retain_stores_the_facts_the_client_sent(client: Hindsight, seeded: str) -> None:
    stored = {m.text: m for m in MemoryUnit.objects.filter(bank_id=seeded)}
    assert set(stored) == {ALICE, BOB, POLICY, CAROL}
    assert stored[ALICE].tags == ["team", "alice"] and stored[ALICE].context == "team chat"
    assert stored[CAROL].document_id == "handbook" and stored[CAROL].metadata == {"source": "hr"}
    assert stored[POLICY].tags == []
    listed = client.list_memories(seeded)
    assert listed.total == 4 and {i.text for i in listed.items} == set(stored)


@pytest.mark.parametrize(
    ("tags", "mode", "expected"),
    [
        (["team", "alice"], "any", {ALICE, BOB, POLICY}),
        (["team", "alice"], "all", {ALICE, POLICY}),
        (["team", "alice"], "any_strict", {ALICE, BOB}),
        (["team", "alice"], "all_strict", {ALICE}),
        (["team", "alice"], "exact", {ALICE}),
        (["team"], "exact", {BOB}),
        ([], "exact", {POLICY}),
        (None, "any", {ALICE, BOB, POLICY, CAROL}),
    ],
)
def test_recall_with_each_tags_match_returns_exactly_the_matching_facts(
    client: Hindsight, seeded: str, tags: list[str] | None, mode: str, expected: set[str]
) -> None:
    assert _recall(client, seeded, tags, mode) == expected


def test_recall_results_carry_upstream_fields(client: Hindsight, seeded: str) -> None:
    response = client.recall(seeded, "Who prefers async communication?", tags=["alice"],
                             tags_match="any_strict", types=["world"], trace=True)
    (result,) = response.results
    assert result.text == ALICE and result.type == "world" and result.context == "team chat"
    assert result.tags == ["team", "alice"] and result.scores.final > 0
    assert response.trace["num_results"] == 1


def test_recall_with_tag_groups_through_the_client(client: Hindsight, seeded: str) -> None:
    response = client.recall(
        seeded, "meetings", tag_groups=[{"or": [{"tags": ["carol"]}, {"tags": ["alice"]}]}],
    )
    assert {r.text for r in response.results} == {ALICE, CAROL}
