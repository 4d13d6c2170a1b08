"""The official hindsight-client 1.1.0 directive calls against our running server: create, list
(with its tag filter and paging), get, update, delete, in upstream's shapes."""

from __future__ import annotations

import pytest
from hindsight_client_api.exceptions import ApiException

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.integration]

BANK = "compat-directives"


def test_directive_crud_round_trip_through_the_official_client(client):
    formal = client.create_directive(BANK, name="Formal", content="Answer in formal English.",
                                     priority=5)
    team = client.create_directive(BANK, name="Team", content="Name the team lead.",
                                   tags=["team"], is_active=True)
    assert (formal.name, formal.priority, formal.is_active, formal.tags) == (
        "Formal", 5, True, [])
    assert formal.bank_id == BANK and formal.created_at and formal.updated_at

    listed = client.list_directives(BANK)
    assert [d.name for d in listed.items] == ["Formal", "Team"] and listed.total == 2
    assert [d.name for d in client.list_directives(BANK, tags=["ops"]).items] == ["Formal"]
    assert [d.name for d in client.list_directives(BANK, tags=["team"]).items] == [
        "Formal", "Team"]
    page = client.list_directives(BANK, limit=1, offset=1)
    assert [d.name for d in page.items] == ["Team"] and page.total == 2

    got = client.get_directive(BANK, team.id)
    assert got.to_dict() == team.to_dict()

    changed = client.update_directive(BANK, team.id, content="Never name customers.",
                                      priority=9, is_active=False)
    assert (changed.content, changed.priority, changed.is_active, changed.tags) == (
        "Never name customers.", 9, False, ["team"])
    assert [d.name for d in client.list_directives(BANK).items] == ["Formal"]

    client.delete_directive(BANK, team.id)
    with pytest.raises(ApiException) as missing:
        client.get_directive(BANK, team.id)
    assert missing.value.status == 404


def test_a_bad_directive_is_refused_with_422_naming_the_field(client):
    with pytest.raises(ApiException) as refused:
        client.create_directive(BANK, name="", content="Answer formally.")
    assert refused.value.status == 422
    assert '"name"' in refused.value.body
