"""The curation admin in a real browser, against a live server and a real Celery worker, with
every LLM call answered by the scripted server: log in, filter stale models, refresh one and
read the new version and its diff, be refused an invalid cron, edit a model while its refresh is
held at the LLM, cancel a parked operation. Screenshots of the list and the diff page go to the
test's tmp dir. Nothing here depends on the admin's CSS (static files may be unstyled)."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import pytest

from fakes.llm_server import Reply
from mentalmodels.models import MentalModel, MentalModelHistory
from mentalmodels.services import refresh_dedupe_key
from mentalmodels.triggers import trigger_normalize
from operations.models import CANCELLED, COMPLETED, PENDING, Operation
from tests.factories import make_memory
from tests.workers import wait_until

pytestmark = pytest.mark.integration

BANK = "browser-bank"
LIST = "/admin/mentalmodels/mentalmodel/"


def answer_with(server, memory_id: str) -> list[str]:
    """Every reflect run answers at once, citing the memory; the answer names the question it
    was asked, so the document says which configuration wrote it. Returns the questions."""
    questions: list[str] = []
    lock = threading.Lock()

    def respond(body: dict) -> Reply:
        prompt = next((str(m.get("content") or "") for m in body.get("messages", [])
                       if m.get("role") == "user"), "")
        question = prompt.splitlines()[0].removeprefix("Question: ") if prompt else ""
        with lock:
            questions.append(question)
        choice = body.get("tool_choice")
        if isinstance(choice, dict):
            return Reply.tool_calls([(choice["function"]["name"], {"query": "team"})])
        read = any(memory_id in str(m.get("content") or "") for m in body.get("messages", [])
                   if m.get("role") == "tool")
        if not read:  # cite only what a tool returned (reflect drops ungrounded citations)
            return Reply.tool_calls([("recall", {"query": "standups"})])
        return Reply.tool_calls([("done", {"answer": f"## Team\n\nAnswer to: {question}",
                                           "memory_ids": [memory_id], "mental_model_ids": []})])

    server.respond_with(respond)
    return questions


def make_model(mental_model_id: str, **fields: Any) -> MentalModel:
    trigger = fields.pop("trigger", {})
    return MentalModel.objects.create(
        bank_id=BANK, mental_model_id=mental_model_id, name=fields.pop("name", mental_model_id),
        source_query=fields.pop("source_query", "How does the team work?"),
        trigger=trigger_normalize(trigger), **fields,
    )


def row_ids(page) -> set[str]:
    return set(page.locator("#result_list tbody td.field-mental_model_id").all_inner_texts())


def run_action(page, action: str, *values: Any) -> None:
    for value in values:
        page.check(f"input[name=_selected_action][value='{value}']")
    page.select_option("select[name=action]", action)
    page.click("button[name=index]")


@pytest.fixture
def bank_id() -> str:
    return BANK


@pytest.fixture
def bank_fields() -> dict[str, str]:
    return {"name": "Browser bank"}


def test_filter_stale_refresh_one_and_read_its_new_version_and_diff(
    admin_page, live_server, bank, llm, worker_factory, screenshots: Path
):
    page = admin_page
    fact = make_memory(BANK, "Alice prefers async standups", embed=True)
    answer_with(llm, str(fact.id))
    stale = make_model("stale-model", name="Stale model", content="Old document\n")
    make_model("fresh-model", name="Fresh model", content="Fresh document\n",
               last_memory_seen_at=fact.updated_at)
    worker_factory(env=llm.env)

    page.goto(f"{live_server.url}{LIST}")
    assert row_ids(page) == {"stale-model", "fresh-model"}
    page.screenshot(path=str(screenshots / "mental-model-list.png"), full_page=True)
    page.click("#changelist-filter a:text-is('Stale')")
    page.wait_for_url("**stale=yes**")
    assert row_ids(page) == {"stale-model"}

    run_action(page, "refresh", stale.uid)
    assert "Queued 1 refresh(es)." in page.inner_text("ul.messagelist")
    wait_until(lambda: MentalModel.objects.get(uid=stale.uid).last_refreshed_at, 60,
               message="the worker's refresh")

    page.goto(f"{live_server.url}{LIST}{stale.uid}/change/")
    history = page.locator("#history-group")
    assert history.locator(".history-version").count() == 1  # the replaced "Old document"
    assert history.locator(".history-failure").count() == 0
    page.click("a.history-diff")
    page.wait_for_url("**/diff/**")
    left = page.locator("table.diff td.diff_left").all_inner_texts()
    right = page.locator("table.diff td.diff_right").all_inner_texts()
    assert "Old document" in left
    assert "Answer to: How does the team work?" in right
    page.screenshot(path=str(screenshots / "diff.png"), full_page=True)
    assert (screenshots / "mental-model-list.png").stat().st_size > 0
    assert (screenshots / "diff.png").stat().st_size > 0

    # The list now calls it fresh: the stale filter is empty.
    page.goto(f"{live_server.url}{LIST}?stale=yes")
    assert row_ids(page) == set()


def test_an_invalid_cron_is_a_red_field_error_and_nothing_is_saved(admin_page, live_server, bank):
    page = admin_page
    model = make_model("cron-model", source_query="Original question")
    page.goto(f"{live_server.url}{LIST}{model.uid}/change/")
    trigger = json.loads(page.input_value("#id_trigger"))
    trigger["refresh_cron"] = "every full moon"
    page.fill("#id_trigger", json.dumps(trigger))
    page.fill("#id_source_query", "A question that must not be saved")
    page.click("input[name=_save]")
    # The refused save answers on the same URL: wait for the new page, not only its first bytes.
    page.wait_for_load_state("load")

    error = page.locator(".field-trigger ul.errorlist")
    assert error.count() == 1
    assert "refresh_cron" in error.inner_text() and "every full moon" not in page.url
    assert page.locator("p.errornote").count() == 1  # "Please correct the error below."
    model.refresh_from_db()
    assert model.source_query == "Original question" and model.trigger["refresh_cron"] is None
    assert not Operation.objects.exists()


def test_editing_the_query_while_a_refresh_is_held_refuses_its_write_and_the_follow_up_writes(
    admin_page, live_server, bank, llm, worker_factory
):
    page = admin_page
    fact = make_memory(BANK, "Alice prefers async standups", embed=True)
    held_reply, hold = Reply.hold(Reply.tool_calls([("search_observations", {"query": "team"})]))
    llm.script(held_reply)
    questions = answer_with(llm, str(fact.id))
    model = make_model("edited-model", source_query="Old question", content="v1\n")
    worker_factory(env=llm.env)
    key = refresh_dedupe_key(bank_id=BANK, mental_model_id="edited-model")

    page.goto(f"{live_server.url}{LIST}")
    run_action(page, "refresh", model.uid)
    assert hold.wait_received(30)  # the refresh is now waiting at the LLM
    held = Operation.objects.get(dedupe_key=key)
    assert held.status == "processing"

    page.goto(f"{live_server.url}{LIST}{model.uid}/change/")
    page.fill("#id_source_query", "New question")
    page.click("input[name=_save]")
    assert "was changed successfully" in page.inner_text("ul.messagelist")
    hold.release()

    held = wait_until(lambda: (op := Operation.objects.get(id=held.id)).status != "processing"
                      and op, 60, message="the held refresh to end")
    assert held.status == CANCELLED and "superseded" in held.error_message
    follow_up = wait_until(
        lambda: Operation.objects.filter(dedupe_key=key, status=COMPLETED).first(), 60,
        message="the follow-up refresh")
    model.refresh_from_db()
    assert model.source_query == "New question"
    assert model.last_refresh_source_query == "New question"
    assert model.content == "## Team\n\nAnswer to: New question"
    assert questions[-1] == "New question"
    # Only the follow-up wrote a version; the superseded run left no failure behind.
    versions = MentalModelHistory.objects.filter(model=model, kind="version")
    assert [v.operation_id for v in versions] == [follow_up.id]
    assert not MentalModelHistory.objects.filter(model=model, kind="refresh_failed").exists()


def test_cancel_a_parked_operation_from_the_operations_list(admin_page, live_server, bank):
    page = admin_page
    make_model("parked-model")
    parked = Operation.objects.create(
        bank_id=BANK, operation_type="refresh_mental_model", mental_model_id="parked-model",
        dedupe_key=refresh_dedupe_key(bank_id=BANK, mental_model_id="parked-model"),
        automatic=True, next_retry_at="2999-01-01T00:00:00Z",
    )
    page.goto(f"{live_server.url}/admin/operations/operation/?parked=yes")
    assert page.locator("#result_list .op-parked").count() == 1
    run_action(page, "cancel_pending", parked.id)
    assert "Cancelled 1 operation(s)" in page.inner_text("ul.messagelist")
    parked.refresh_from_db()
    assert parked.status == CANCELLED
    page.goto(f"{live_server.url}/admin/operations/operation/?parked=yes")
    assert page.locator("#result_list .op-parked").count() == 0
    assert Operation.objects.filter(status=PENDING).count() == 0
