"""The Django admin for mental models: every write through the services, validation as field
errors, the list with its staleness and filters, the history inline, the diff page, actions."""

from __future__ import annotations

import json
import re

import pytest

from mentalmodels.models import MentalModel, MentalModelHistory
from mentalmodels.services import mental_model_refresh_request, refresh_dedupe_key
from operations.leases import operation_claim
from operations.models import CANCELLED, PENDING, PROCESSING, Lease, Operation
from tests.factories import make_memory, make_mental_model

pytestmark = pytest.mark.django_db

LIST = "/admin/mentalmodels/mentalmodel/"
ADD = LIST + "add/"


def change_url(model: MentalModel) -> str:
    return f"{LIST}{model.uid}/change/"


def form_data(**fields) -> dict:
    """A POST of the admin form: the fields, plus the (empty) history inline's management form."""
    data = {
        "name": "Team", "source_query": "How does the team work?", "tags": "", "max_tokens": "2048",
        "trigger": "{}", "history-TOTAL_FORMS": "0", "history-INITIAL_FORMS": "0",
    }
    data.update({k: (json.dumps(v) if k == "trigger" and not isinstance(v, str) else v)
                 for k, v in fields.items()})
    return data


def errors_of(response, field: str) -> list[str]:
    return [str(e) for e in response.context["adminform"].form.errors.get(field, [])]


# --- create ---------------------------------------------------------------------------------


def test_add_creates_through_the_service_with_a_normalised_trigger_and_its_first_refresh(
    admin_client, bank
):
    response = admin_client.post(ADD, form_data(
        bank=bank.id, mental_model_id="team", tags="team, people, team",
        trigger={"refresh_cron": "0 * * * *"},
    ))
    assert response.status_code == 302, response.content.decode()[:2000]
    model = MentalModel.objects.get(bank=bank, mental_model_id="team")
    assert model.tags == ["team", "people"]
    assert model.trigger["refresh_cron"] == "0 * * * *" and model.trigger["mode"] == "full"
    assert "keep_trace" in model.trigger  # every key present: trigger_normalize ran
    op = Operation.objects.get(mental_model_id="team")
    assert op.status == PENDING and op.operation_type == "refresh_mental_model"


def test_add_without_an_id_generates_one_like_the_api(admin_client, bank):
    response = admin_client.post(ADD, form_data(bank=bank.id))
    assert response.status_code == 302
    assert MentalModel.objects.get(bank=bank).mental_model_id.startswith("mm-")


def test_add_with_an_invalid_cron_shows_the_error_on_the_trigger_field_and_saves_nothing(
    admin_client, bank
):
    response = admin_client.post(ADD, form_data(
        bank=bank.id, mental_model_id="team", trigger={"refresh_cron": "every hour"}
    ))
    assert response.status_code == 200
    [error] = errors_of(response, "trigger")
    assert error.startswith("trigger.refresh_cron:") and "refresh_cron" in error
    assert 'class="errorlist' in response.content.decode()
    assert not MentalModel.objects.exists() and not Operation.objects.exists()


def test_add_refuses_cron_together_with_refresh_after_consolidation(admin_client, bank):
    response = admin_client.post(ADD, form_data(
        bank=bank.id, mental_model_id="team",
        trigger={"refresh_cron": "0 * * * *", "refresh_after_consolidation": True},
    ))
    assert response.status_code == 200
    assert "mutually exclusive" in " ".join(errors_of(response, "trigger"))
    assert not MentalModel.objects.exists()


def test_add_refuses_an_unknown_trigger_key(admin_client, bank):
    response = admin_client.post(ADD, form_data(bank=bank.id, trigger={"cron": "0 * * * *"}))
    assert response.status_code == 200
    assert "trigger.cron: Extra inputs are not permitted" in errors_of(response, "trigger")
    assert not MentalModel.objects.exists()


def test_add_refuses_an_id_that_breaks_the_id_rule(admin_client, bank):
    response = admin_client.post(ADD, form_data(bank=bank.id, mental_model_id="Not An Id"))
    assert response.status_code == 200
    assert "must match" in " ".join(errors_of(response, "mental_model_id"))
    assert not MentalModel.objects.exists()


def test_add_of_a_taken_id_is_refused_by_the_service_and_changes_nothing(admin_client, bank):
    existing = make_mental_model(bank, "team", name="Original")
    response = admin_client.post(ADD, form_data(bank=bank.id, mental_model_id="team",
                                                 name="Duplicate"), follow=True)
    assert "Not saved" in response.content.decode() and "already exists" in response.content.decode()
    assert list(MentalModel.objects.values_list("name", flat=True)) == ["Original"]
    assert not Operation.objects.exists()
    existing.refresh_from_db()
    assert existing.name == "Original"


# --- edit -----------------------------------------------------------------------------------


def test_edit_with_an_invalid_cron_is_a_field_error_and_leaves_the_row_alone(admin_client, bank):
    model = make_mental_model(bank, "team", source_query="old query")
    response = admin_client.post(change_url(model), form_data(
        source_query="new query", trigger={"refresh_cron": "61 * * * *"}
    ))
    assert response.status_code == 200
    assert errors_of(response, "trigger")
    model.refresh_from_db()
    assert model.source_query == "old query" and model.trigger["refresh_cron"] is None


def test_edit_of_the_source_query_while_a_refresh_runs_bumps_its_fence_and_queues_a_follow_up(
    admin_client, bank, monkeypatch
):
    monkeypatch.setattr("operations.dispatch.operation_send_on_commit", lambda **kw: True)
    model = make_mental_model(bank, "team", source_query="old query")
    op = mental_model_refresh_request(bank_id=bank.id, mental_model_id="team")
    claimed = operation_claim(operation_id=op.id, holder="test")
    assert isinstance(claimed, Operation)
    key = refresh_dedupe_key(bank_id=bank.id, mental_model_id="team")
    fence_of_the_running_job = Lease.objects.get(key=key).fence

    response = admin_client.post(change_url(model), form_data(source_query="new query"))

    assert response.status_code == 302
    model.refresh_from_db()
    assert model.source_query == "new query"
    assert Lease.objects.get(key=key).fence > fence_of_the_running_job  # its write will be refused
    assert Operation.objects.get(id=op.id).status == PROCESSING
    assert Operation.objects.filter(dedupe_key=key, status=PENDING).count() == 1  # the follow-up


def test_edit_of_the_name_only_leaves_a_running_refresh_alone(admin_client, bank, monkeypatch):
    monkeypatch.setattr("operations.dispatch.operation_send_on_commit", lambda **kw: True)
    model = make_mental_model(bank, "team")
    op = mental_model_refresh_request(bank_id=bank.id, mental_model_id="team")
    operation_claim(operation_id=op.id, holder="test")
    key = refresh_dedupe_key(bank_id=bank.id, mental_model_id="team")
    fence = Lease.objects.get(key=key).fence
    stored = dict(model.trigger)

    response = admin_client.post(change_url(model), form_data(name="Renamed", trigger=stored))

    assert response.status_code == 302
    model.refresh_from_db()
    assert model.name == "Renamed" and model.trigger == stored
    assert Lease.objects.get(key=key).fence == fence
    assert not Operation.objects.filter(dedupe_key=key, status=PENDING).exists()


def test_the_change_form_shows_the_stored_trigger_with_every_key(admin_client, bank):
    model = make_mental_model(bank, "team", trigger={"refresh_cron": "*/5 * * * *"})
    response = admin_client.get(change_url(model))
    assert response.status_code == 200
    initial = response.context["adminform"].form.initial["trigger"]
    assert initial["refresh_cron"] == "*/5 * * * *" and "keep_trace" in initial


# --- delete ---------------------------------------------------------------------------------


def test_delete_goes_through_the_service_bumping_the_fence_and_cancelling_queued_refreshes(
    admin_client, bank, monkeypatch
):
    monkeypatch.setattr("operations.dispatch.operation_send_on_commit", lambda **kw: True)
    model = make_mental_model(bank, "team")
    queued = mental_model_refresh_request(bank_id=bank.id, mental_model_id="team")
    key = refresh_dedupe_key(bank_id=bank.id, mental_model_id="team")
    response = admin_client.post(f"{LIST}{model.uid}/delete/", {"post": "yes"})
    assert response.status_code == 302
    assert not MentalModel.objects.filter(uid=model.uid).exists()
    assert Operation.objects.get(id=queued.id).status == CANCELLED
    assert Lease.objects.get(key=key).fence >= 1


def test_bulk_delete_action_goes_through_the_service(admin_client, bank, monkeypatch):
    monkeypatch.setattr("operations.dispatch.operation_send_on_commit", lambda **kw: True)
    a, b = make_mental_model(bank, "a"), make_mental_model(bank, "b")
    queued = mental_model_refresh_request(bank_id=bank.id, mental_model_id="a")
    admin_client.post(LIST, {"action": "delete_selected", "_selected_action": [a.uid, b.uid],
                             "post": "yes"})
    assert not MentalModel.objects.exists()
    assert Operation.objects.get(id=queued.id).status == CANCELLED


# --- list -----------------------------------------------------------------------------------


def test_changelist_shows_trigger_kind_mode_staleness_and_pause(admin_client, bank):
    make_memory(bank, "fact")
    make_mental_model(bank, "stale-one", name="Stale one")
    make_mental_model(bank, "on-cron", name="On cron", trigger={"refresh_cron": "0 * * * *"})
    make_mental_model(bank, "after-cons", name="After", trigger={"refresh_after_consolidation": True})
    response = admin_client.get(LIST)
    assert response.status_code == 200
    body = response.content.decode()
    assert "stale-one" in body
    assert ">cron<" in body and ">after consolidation<" in body and ">manual<" in body


def _stale_cells(body: str, column: str = "stale") -> dict[str, str]:
    """Each row's mental model id and the markup of its cell in ``column``."""
    rows = re.findall(r'<tr>.*?<td class="field-mental_model_id">([^<]+)</td>.*?'
                      rf'<td class="field-{column}">(.*?)</td>', body, re.DOTALL)
    return dict(rows)


def test_changelist_shows_a_stale_model_as_a_warning_and_no_view_site_link(admin_client, bank):
    memory = make_memory(bank, "fact")
    make_mental_model(bank, "stale-one")
    make_mental_model(bank, "fresh-one", last_memory_seen_at=memory.updated_at)
    body = admin_client.get(LIST).content.decode()
    cells = _stale_cells(body)
    assert set(cells) == {"stale-one", "fresh-one"}, body[:3000]
    assert 'class="stale-warning"' in cells["stale-one"] and "stale" in cells["stale-one"]
    assert cells["fresh-one"] == "fresh"
    # Neither reads as the boolean column's green check (icon-yes).
    assert "icon-" not in cells["stale-one"] + cells["fresh-one"]
    # "/" is no page of this service: the admin links nowhere outside itself.
    for page in (LIST, "/admin/"):
        assert "View site" not in admin_client.get(page).content.decode()


def test_changelist_shows_a_paused_model_as_a_warning_not_a_green_check(admin_client, bank):
    memory = make_memory(bank, "fact")
    make_mental_model(bank, "paused-one", last_refresh_failed_at=memory.updated_at)
    make_mental_model(bank, "running-one")
    cells = _stale_cells(admin_client.get(LIST).content.decode(), column="paused")
    assert set(cells) == {"paused-one", "running-one"}
    assert 'class="paused-warning"' in cells["paused-one"] and "paused" in cells["paused-one"]
    assert cells["running-one"] == "no"
    assert "icon-" not in cells["paused-one"] + cells["running-one"]


def test_filters_stale_paused_and_trigger_kind(admin_client, bank):
    memory = make_memory(bank, "fact")
    make_mental_model(bank, "stale-one")
    make_mental_model(bank, "fresh-one", last_memory_seen_at=memory.updated_at)
    make_mental_model(bank, "paused-one", last_memory_seen_at=memory.updated_at,
              last_refresh_failed_at=memory.updated_at, trigger={"refresh_cron": "0 * * * *"})

    def ids(query: str) -> set[str]:
        response = admin_client.get(LIST + query)
        assert response.status_code == 200
        return {m.mental_model_id for m in response.context["cl"].result_list}

    assert ids("?stale=yes") == {"stale-one"}
    assert ids("?stale=no") == {"fresh-one", "paused-one"}
    assert ids("?paused=yes") == {"paused-one"}
    assert ids("?trigger_kind=cron") == {"paused-one"}
    assert ids("?trigger_kind=manual") == {"stale-one", "fresh-one"}
    assert ids("?q=fresh") == {"fresh-one"}


# --- history, diff, actions ----------------------------------------------------------------


def test_change_page_lists_history_newest_first_telling_versions_from_failures(admin_client, bank):
    model = make_mental_model(bank, "m", content="new line\n")
    MentalModelHistory.objects.create(model=model, kind="version", previous_content="old line\n")
    MentalModelHistory.objects.create(model=model, kind="refresh_failed", reason="unexpected_error",
                                      exception="LLMProviderError: boom")
    response = admin_client.get(change_url(model))
    body = response.content.decode()
    assert body.index("history-failure") < body.index("history-version")  # newest first
    assert "LLMProviderError: boom" in body and "diff with current" in body


def test_diff_page_shows_a_version_side_by_side_with_the_current_content(admin_client, bank):
    model = make_mental_model(bank, "m", content="line one\nline two changed\n")
    entry = MentalModelHistory.objects.create(model=model, kind="version",
                                              previous_content="line one\nline two\n")
    response = admin_client.get(f"{LIST}{model.uid}/diff/{entry.id}/")
    assert response.status_code == 200
    body = response.content.decode()
    assert 'class="diff"' in body
    assert '<td class="diff_left">line one</td>' in body  # unchanged: on both sides
    assert ('<tr class="diff_chg"><td class="diff_header">2</td><td class="diff_left">line two</td>'
            '<td class="diff_header">2</td><td class="diff_right">line two changed</td></tr>') in body


def test_diff_page_of_a_failure_entry_is_not_found(admin_client, bank):
    model = make_mental_model(bank, "m")
    entry = MentalModelHistory.objects.create(model=model, kind="refresh_failed", reason="x")
    assert admin_client.get(f"{LIST}{model.uid}/diff/{entry.id}/").status_code == 404


def test_refresh_refresh_full_and_clear_actions(admin_client, bank, monkeypatch):
    monkeypatch.setattr("operations.dispatch.operation_send_on_commit", lambda **kw: True)
    model = make_mental_model(bank, "m", content="doc")
    admin_client.post(LIST, {"action": "refresh", "_selected_action": [model.uid]})
    assert Operation.objects.filter(mental_model_id="m", status=PENDING).count() == 1
    admin_client.post(LIST, {"action": "refresh_full", "_selected_action": [model.uid]})
    op = Operation.objects.get(mental_model_id="m", status=PENDING)  # coalesced
    assert op.payload == {"mode": "full"}
    admin_client.post(LIST, {"action": "clear", "_selected_action": [model.uid]})
    model.refresh_from_db()
    assert model.content == ""
    assert MentalModelHistory.objects.get(model=model).reason == "cleared"


def test_refresh_action_releases_a_parked_refresh(admin_client, bank, monkeypatch):
    sent: list = []
    monkeypatch.setattr("operations.dispatch.operation_send_on_commit",
                        lambda **kw: sent.append(kw["operation_id"]) or True)
    model = make_mental_model(bank, "m")
    parked = Operation.objects.create(
        bank=bank, operation_type="refresh_mental_model", mental_model_id="m", automatic=True,
        dedupe_key=refresh_dedupe_key(bank_id=bank.id, mental_model_id="m"),
        next_retry_at="2999-01-01T00:00:00Z",
    )
    admin_client.post(LIST, {"action": "refresh", "_selected_action": [model.uid]})
    parked.refresh_from_db()
    assert parked.next_retry_at is None and parked.automatic is False
    assert parked.id in sent


def test_resume_action_refreshes_only_paused_models(admin_client, bank, monkeypatch):
    monkeypatch.setattr("operations.dispatch.operation_send_on_commit", lambda **kw: True)
    memory = make_memory(bank, "fact")
    paused = make_mental_model(bank, "paused", last_refresh_failed_at=memory.updated_at)
    running = make_mental_model(bank, "fine")
    admin_client.post(LIST, {"action": "resume", "_selected_action": [paused.uid, running.uid]})
    assert list(Operation.objects.values_list("mental_model_id", flat=True)) == ["paused"]


def test_dry_run_action_renders_the_preview_with_a_diff_and_writes_nothing(admin_client, bank):
    model = make_mental_model(bank, "m", tags=["nothing-matches"], content="doc")
    response = admin_client.post(LIST, {"action": "dry_run", "_selected_action": [model.uid]})
    assert response.status_code == 200
    body = response.content.decode()
    assert "content_preserved_no_new_facts" in body and 'class="diff"' in body
    assert "Nothing was written" in body
    model.refresh_from_db()
    assert model.content == "doc" and model.last_refreshed_at is None
    assert not MentalModelHistory.objects.exists() and not Operation.objects.exists()
