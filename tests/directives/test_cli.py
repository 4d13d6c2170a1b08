"""``hindsight directive …`` in-process against the live server over HTTP: JSON output is the
API's answer, the table says what happened, a refused call is one line and exit code 1."""

from __future__ import annotations

import pytest

from mentalmodels.directives.models import Directive
from tests.factories import make_bank
from tests.surfaces.cli.invoke import as_json, cli_against

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.integration]

BANK = "cli-directives"


@pytest.fixture
def cli(live_server):
    make_bank(BANK)
    return cli_against(live_server.url)


def test_the_directive_commands_create_list_get_update_and_delete(cli):
    formal = as_json(cli("-o", "json", "directive", "create", BANK, "Formal",
                         "Answer in formal English.", "--priority", "5"))
    team = as_json(cli("-o", "json", "directive", "create", BANK, "Team", "Name the lead.",
                       "--tags", "team", "--inactive"))
    assert (formal["priority"], formal["tags"], team["is_active"], team["tags"]) == (
        5, [], False, ["team"])

    listed = as_json(cli("-o", "json", "directive", "list", BANK))
    assert [d["name"] for d in listed["items"]] == ["Formal"]
    listed = as_json(cli("-o", "json", "directive", "list", BANK, "--all"))
    assert [d["name"] for d in listed["items"]] == ["Formal", "Team"]
    table = cli("-o", "table", "directive", "list", BANK, "--all").stdout
    assert formal["id"] in table and "Formal" in table

    assert as_json(cli("-o", "json", "directive", "get", BANK, team["id"])) == team
    assert "Answer in formal English." in cli("-o", "table", "directive", "get", BANK,
                                              formal["id"]).stdout

    updated = as_json(cli("-o", "json", "directive", "update", BANK, team["id"], "--active",
                          "true", "--priority", "9", "--content", "Never name customers."))
    assert (updated["is_active"], updated["priority"], updated["content"]) == (
        True, 9, "Never name customers.")
    assert "Updated directive" in cli("-o", "table", "directive", "update", BANK, team["id"],
                                      "--name", "Privacy").stdout

    assert "Deleted directive" in cli("-o", "table", "directive", "delete", BANK, team["id"],
                                      "-y").stdout
    assert not Directive.objects.filter(id=team["id"]).exists()


def test_a_refused_directive_call_is_one_line_and_exit_code_1(cli):
    # In-process the refusal comes out as the ApiError the console script prints on one line.
    refused = cli("directive", "create", BANK, "", "Answer formally.", code=1)
    assert str(refused.exception) == (
        "HTTP 422: body.name: String should have at least 1 character")
    gone = cli("directive", "get", BANK, "not-a-directive", code=1)
    assert str(gone.exception) == "HTTP 404: Directive 'not-a-directive' not found"
    cli("directive", "update", BANK, "x", "--active", "maybe", code=2)
    assert not Directive.objects.exists()
