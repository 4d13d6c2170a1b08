"""Directives in the admin: listed, added, changed, activated, deactivated and deleted through
the services (each change stamps the pages it makes stale); a blank one is refused."""

from __future__ import annotations

import pytest

from mentalmodels.directives.models import Directive, DirectiveScopeStamp
from mentalmodels.directives.services import directive_create
from tests.factories import make_bank

pytestmark = pytest.mark.django_db

LIST = "/admin/directives/directive/"


def form(**fields) -> dict:
    return {"bank": "adm", "name": "Formal", "content": "Answer formally.", "priority": "0",
            "is_active": "on", "tags_text": "", **fields}


def test_the_list_shows_each_bank_s_directives(admin_client):
    make_bank("adm")
    directive_create(bank_id="adm", name="Formal", content="x", priority=5, tags=["team"])
    html = admin_client.get(LIST).content.decode()
    assert "Formal" in html and "team" in html


def test_add_and_change_go_through_the_services(admin_client):
    make_bank("adm")
    response = admin_client.post(LIST + "add/", form(tags_text="team, ops, team"))
    assert response.status_code == 302, response.context["adminform"].form.errors
    directive = Directive.objects.get()
    assert (directive.name, directive.tags, directive.is_active) == ("Formal", ["team", "ops"],
                                                                     True)
    # Through the service: the change is stamped for its tag set.
    assert list(DirectiveScopeStamp.objects.values_list("tags", flat=True)) == [["ops", "team"]]

    response = admin_client.post(f"{LIST}{directive.pk}/change/",
                                 form(content="Answer in formal English.", priority="7",
                                      tags_text=""))
    assert response.status_code == 302
    directive.refresh_from_db()
    assert (directive.content, directive.priority, directive.tags) == (
        "Answer in formal English.", 7, [])
    assert DirectiveScopeStamp.objects.filter(tags=[]).exists()


@pytest.mark.parametrize("fields", [{"name": "  "}, {"content": ""}, {"priority": str(2**31)}])
def test_a_bad_directive_is_refused_and_nothing_is_written(admin_client, fields):
    make_bank("adm")
    response = admin_client.post(LIST + "add/", form(**fields))
    assert response.status_code == 200 and "errorlist" in response.content.decode()
    assert not Directive.objects.exists()


def test_activate_deactivate_and_delete_actions(admin_client):
    make_bank("adm")
    one = directive_create(bank_id="adm", name="One", content="x", mark_pages_stale=False)
    two = directive_create(bank_id="adm", name="Two", content="y", is_active=False,
                           mark_pages_stale=False)
    ids = [str(one.pk), str(two.pk)]
    admin_client.post(LIST, {"action": "deactivate", "_selected_action": ids})
    assert not Directive.objects.filter(is_active=True).exists()
    assert DirectiveScopeStamp.objects.count() == 1  # "One" was active: its pages changed
    admin_client.post(LIST, {"action": "activate", "_selected_action": ids})
    assert Directive.objects.filter(is_active=True).count() == 2
    admin_client.post(LIST, {"action": "delete_selected", "_selected_action": ids,
                             "post": "yes"})
    assert not Directive.objects.exists()
