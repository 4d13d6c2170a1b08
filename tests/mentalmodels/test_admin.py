"""The Django admin for mental models: list with staleness, history inline, refresh/clear actions."""

from __future__ import annotations

import pytest

from mentalmodels.models import MentalModel, MentalModelHistory
from operations.models import Operation
from tests.factories import make_memory, make_mental_model

pytestmark = pytest.mark.django_db


def test_changelist_shows_models_with_their_stale_flag(admin_client, bank):
    make_memory(bank, "fact")
    make_mental_model(bank, "stale-one", name="Stale one")
    response = admin_client.get("/admin/mentalmodels/mentalmodel/")
    assert response.status_code == 200
    body = response.content.decode()
    assert "stale-one" in body and "icon-yes" in body  # stale: True renders the yes icon


def test_change_page_shows_history_with_a_diff(admin_client, bank):
    model = make_mental_model(bank, "m", content="new line\n")
    MentalModelHistory.objects.create(model=model, kind="version", previous_content="old line\n")
    response = admin_client.get(f"/admin/mentalmodels/mentalmodel/{model.uid}/change/")
    assert response.status_code == 200
    body = response.content.decode()
    assert "-old line" in body and "+new line" in body


def test_refresh_and_clear_actions(admin_client, bank):
    model = make_mental_model(bank, "m", content="doc")
    url = "/admin/mentalmodels/mentalmodel/"
    admin_client.post(url, {"action": "refresh", "_selected_action": [model.uid]})
    assert Operation.objects.filter(mental_model_id="m", status="pending").count() == 1
    admin_client.post(url, {"action": "clear", "_selected_action": [model.uid]})
    assert MentalModel.objects.get(uid=model.uid).content == ""


def test_dry_run_action_reports_the_preview_and_writes_nothing(admin_client, bank):
    model = make_mental_model(bank, "m", tags=["nothing-matches"], content="doc")
    response = admin_client.post("/admin/mentalmodels/mentalmodel/",
                                 {"action": "dry_run", "_selected_action": [model.uid]}, follow=True)
    assert "content_preserved_no_new_facts" in response.content.decode()
    model.refresh_from_db()
    assert model.content == "doc" and model.last_refreshed_at is None
