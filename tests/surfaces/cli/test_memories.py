"""``hindsight memory …`` in-process against the live server over HTTP: get, update,
invalidate, restore, history and list (live and invalidated), in the API's answers; a refused
call is one line and exit code 1, a command without an edit a usage error."""

from __future__ import annotations

import pytest

from hindsight.banks.models import InvalidatedMemoryUnit, MemoryUnit
from tests.factories import make_bank, make_memory
from tests.surfaces.cli.invoke import as_json, cli_against

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.integration]

BANK = "cli-memories"


@pytest.fixture
def cli(live_server):
    make_bank(BANK)
    return cli_against(live_server.url)


def test_the_memory_commands_edit_invalidate_restore_and_show_the_history(cli,
                                                                          openai_embeddings):
    fact = make_memory(BANK, "The deploy server is db-1.", tags=["ops"], embed=True)
    memory_id = str(fact.id)

    got = as_json(cli("-o", "json", "memory", "get", BANK, memory_id))
    assert (got["text"], got["state"], got["tags"]) == ("The deploy server is db-1.", "valid",
                                                        ["ops"])
    assert "db-1" in cli("-o", "table", "memory", "get", BANK, memory_id).stdout

    edited = as_json(cli("-o", "json", "memory", "update", BANK, memory_id, "--text",
                         "The deploy server is db-2.", "--tags", "ops,infra",
                         "--metadata", "source=chat"))
    assert (edited["text"], edited["tags"], edited["metadata"]) == (
        "The deploy server is db-2.", ["ops", "infra"], {"source": "chat"})

    invalidated = as_json(cli("-o", "json", "memory", "invalidate", BANK, memory_id,
                              "--reason", "decommissioned"))
    assert (invalidated["state"], invalidated["invalidation_reason"]) == (
        "invalidated", "decommissioned")
    assert InvalidatedMemoryUnit.objects.filter(id=fact.id).exists()
    assert as_json(cli("-o", "json", "memory", "list", BANK))["total"] == 0
    archived = as_json(cli("-o", "json", "memory", "list", BANK, "--state", "invalidated"))
    assert [m["id"] for m in archived["items"]] == [memory_id]

    restored = as_json(cli("-o", "json", "memory", "restore", BANK, memory_id))
    assert restored["state"] == "valid" and MemoryUnit.objects.filter(id=fact.id).exists()

    history = as_json(cli("-o", "json", "memory", "history", BANK, memory_id))
    assert [h["kind"] for h in history] == ["fact_edited", "fact_invalidated", "fact_restored"]
    table = cli("-o", "table", "memory", "history", BANK, memory_id).stdout
    assert "fact_invalidated" in table and "decommissioned" in table


def test_a_refused_memory_command_is_one_line_and_exit_code_1(cli):
    # In-process the refusal comes out as the ApiError the console script prints on one line.
    missing = cli("memory", "get", BANK, "00000000-0000-0000-0000-000000000000", code=1)
    assert str(missing.exception) == (
        "HTTP 404: Memory unit '00000000-0000-0000-0000-000000000000' not found")
    malformed = cli("memory", "invalidate", BANK, "not-a-uuid", code=1)
    assert str(malformed.exception) == (
        "HTTP 400: Invalid memory_id: 'not-a-uuid' is not a valid UUID")
    cli("memory", "update", BANK, "00000000-0000-0000-0000-000000000000", code=2)
