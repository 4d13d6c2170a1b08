"""The ``hindsight`` CLI against the live server (real worker, scripted LLM): the seed's
commands with its flags, ``--wait`` exit codes, ``--output json`` parsed, errors as one line with
exit code 1.

The commands run in this process through Typer's ``CliRunner`` (``hindsight.surfaces.cli.main``, the
console script's entry point, with its arguments, environment and standard streams), still over
HTTP to the live server; one test runs the installed console script as a subprocess.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from hindsight.surfaces.cli import main, render
from tests.live import LiveStack, fail_every_llm_call, write_documents

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.integration]

BANK = "cli-bank"
HINDSIGHT = shutil.which("hindsight", path=str(Path(sys.executable).parent))
CLIENTS_DOC = Path(__file__).resolve().parents[3] / "docs" / "clients.md"
DOC = "## Team\n\nAlice prefers async; Bob runs the Monday standup."
DOC_2 = "## Team\n\nAlice prefers async; Bob runs standups; Dana likes email."
QUERY = "How does the team communicate?"
COLUMNS = 200


@dataclass
class Ran:
    """What a run of the CLI left: its exit code and its two output streams."""

    returncode: int
    stdout: str
    stderr: str


def hindsight(stack: LiveStack, *args: str, input: str | None = None,
              env: dict[str, str] | None = None) -> Ran:
    """``hindsight ARGS`` in this process, as the console script runs it."""
    runner = CliRunner()
    argv, width = sys.argv, render.out.width
    with runner.isolation(input=input, env={"HINDSIGHT_URL": stack.url, **(env or {})}) as (
        stdout, stderr, _
    ):
        sys.argv = ["hindsight", *args]
        render.out.width = COLUMNS  # as COLUMNS=200 makes it in a fresh process
        try:
            main()
            code = 0
        except SystemExit as exit_:
            code = exit_.code if isinstance(exit_.code, int) else int(exit_.code is not None)
        finally:
            sys.argv, render.out.width = argv, width
            sys.stdout.flush()
            sys.stderr.flush()
        return Ran(code, stdout.getvalue().decode(), stderr.getvalue().decode())


def hindsight_script(stack: LiveStack, *args: str,
                     env: dict[str, str] | None = None) -> Ran:
    """The installed console script, as a subprocess."""
    assert HINDSIGHT, "the hindsight console script is not installed in this venv (make install)"
    done = subprocess.run(
        [HINDSIGHT, *args], capture_output=True, text=True, timeout=120,
        env={**os.environ, "HINDSIGHT_URL": stack.url, "COLUMNS": str(COLUMNS), **(env or {})},
    )
    return Ran(done.returncode, done.stdout, done.stderr)


def ok_json(result: Ran) -> Any:
    assert result.returncode == 0, (result.returncode, result.stdout, result.stderr)
    return json.loads(result.stdout)


def one_error_line(result: Ran) -> str:
    assert result.returncode == 1, (result.returncode, result.stdout, result.stderr)
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert result.stdout == ""
    return lines[0]


@pytest.fixture
def stack(live_stack: LiveStack) -> LiveStack:
    live_stack.seed(BANK, [
        ("Alice prefers async communication over Slack.", ["team"]),
        ("Bob runs the Monday standup.", ["team", "bob"]),
        ("Carol's cat is called Miso.", ["carol"]),
    ])
    live_stack.llm.reset()
    return live_stack


def test_the_seed_commands_drive_a_model_end_to_end(stack: LiveStack) -> None:
    write_documents(stack.llm, {QUERY: DOC})

    # create BANK NAME QUERY --id --tags a,b --tags-match any, following the refresh
    created = ok_json(hindsight(stack, "mental-model", "create", BANK, "Team communication",
                                QUERY, "--id", "team-comms", "--tags", "team,bob",
                                "--tags-match", "any", "--wait"))
    assert created["mental_model_id"] == "team-comms"
    assert created["operation"]["status"] == "completed"
    assert created["operation"]["details"]["outcome"] == "content_written"

    # the seed's plain create (no flags) answers the operation id at once
    plain = ok_json(hindsight(stack, "mental-model", "create", BANK, "Project Status",
                              "What is the current project status?"))
    assert plain["mental_model_id"].startswith("mm-") and plain["operation_id"]
    stack.wait_operation(BANK, plain["operation_id"])

    listed = ok_json(hindsight(stack, "mental-model", "list", BANK))
    by_id = {item["id"]: item for item in listed["items"]}
    assert set(by_id) == {"team-comms", plain["mental_model_id"]}
    assert by_id["team-comms"]["is_stale"] is False and by_id["team-comms"]["content"] is None
    assert by_id["team-comms"]["tags"] == ["team", "bob"]

    model = ok_json(hindsight(stack, "mental-model", "get", BANK, "team-comms"))
    assert model["content"] == DOC and model["trigger"]["tags_match"] == "any"
    # tags_match any: Alice (team) and Bob (team, bob), not Carol
    assert len(model["reflect_response"]["based_on"]["world"]) == 2

    updated = ok_json(hindsight(stack, "mental-model", "update", BANK, "team-comms",
                                "--name", "Updated Team Communication Preferences"))
    assert updated["name"] == "Updated Team Communication Preferences"

    # a new in-scope memory makes it stale; refresh --wait rewrites it
    with stack.http() as http:
        http.post(f"/banks/{BANK}/memories", json={"items": [
            {"content": "Dana likes email.", "tags": ["team"], "strategy": "verbatim"}]})
    assert ok_json(hindsight(stack, "mental-model", "get", BANK, "team-comms"))["is_stale"] is True
    write_documents(stack.llm, {QUERY: DOC_2})
    refreshed = ok_json(hindsight(stack, "mental-model", "refresh", BANK, "team-comms", "--wait"))
    assert refreshed["operation"]["status"] == "completed"
    after = ok_json(hindsight(stack, "--output", "json", "mental-model", "get", BANK,
                              "team-comms"))
    assert after["content"] == DOC_2 and after["is_stale"] is False

    history = ok_json(hindsight(stack, "mental-model", "history", BANK, "team-comms"))
    assert [h["kind"] for h in history] == ["version", "version"]
    assert history[0]["previous_content"] == DOC and history[1]["previous_content"] == ""

    write_documents(stack.llm, {QUERY: "## Team\n\nA different take."})
    preview = ok_json(hindsight(stack, "mental-model", "dry-run-refresh", BANK, "team-comms"))
    assert preview["would_persist"] is True and preview["effective_mode"] == "full"
    assert preview["diff"].startswith("--- current\n+++ preview\n")
    assert ok_json(hindsight(stack, "mental-model", "get", BANK, "team-comms"))["content"] == DOC_2

    traced = ok_json(hindsight(stack, "mental-model", "update", BANK, "team-comms",
                               "--trigger-mode", "delta", "--trigger-keep-trace", "true"))
    assert traced["trigger"]["mode"] == "delta" and traced["trigger"]["keep_trace"] is True
    assert traced["trigger"]["tags_match"] == "any"  # merged key by key

    cleared = ok_json(hindsight(stack, "mental-model", "clear", BANK, "team-comms"))
    assert cleared["content"] == ""

    # delete asks first: "n" keeps the model, -y deletes it
    kept = hindsight(stack, "mental-model", "delete", BANK, "team-comms", input="n\n")
    assert kept.returncode == 1 and "Delete mental model" in kept.stderr
    still = ok_json(hindsight(stack, "mental-model", "get", BANK, "team-comms"))
    assert still["id"] == "team-comms"
    assert ok_json(hindsight(stack, "mental-model", "delete", BANK, "team-comms", "-y")) == {
        "status": "deleted"}
    gone = one_error_line(hindsight(stack, "mental-model", "get", BANK, "team-comms"))
    assert gone.startswith("Error: HTTP 404:") and "team-comms" in gone


def test_table_output_is_readable(stack: LiveStack) -> None:
    write_documents(stack.llm, {QUERY: DOC})
    done = hindsight(stack, "-o", "table", "mental-model", "create", BANK, "Team", QUERY,
                     "--id", "team", "--wait")
    assert done.returncode == 0, done.stderr
    assert "Created mental model team" in done.stdout and "completed" in done.stdout
    shown = hindsight(stack, "mental-model", "get", BANK, "team", "--output", "table")
    assert shown.returncode == 0 and "Alice prefers async" in shown.stdout
    assert "Mental model team" in shown.stdout
    listed = hindsight(stack, "mental-model", "list", BANK, "-o", "table")
    assert "Mental models (1)" in listed.stdout and "team" in listed.stdout
    history = hindsight(stack, "mental-model", "history", BANK, "team", "-o", "table")
    assert history.returncode == 0 and "version" in history.stdout
    assert "+Alice prefers async" in history.stdout  # the diff from empty to the first document
    write_documents(stack.llm, {QUERY: "## Team\n\nA different take."})
    preview = hindsight(stack, "mental-model", "dry-run-refresh", BANK, "team", "-o", "table")
    assert preview.returncode == 0 and "Dry run" in preview.stdout
    diff_lines = [line.strip("│ ") for line in preview.stdout.splitlines()]
    assert "-Alice prefers async; Bob runs the Monday standup." in diff_lines
    assert "+A different take." in diff_lines
    # The one real console-script run: colours follow FORCE_COLOR as a fresh process reads it.
    coloured = hindsight_script(stack, "mental-model", "dry-run-refresh", BANK, "team", "-o",
                                "table", env={"FORCE_COLOR": "1"})
    assert "\x1b[32m+A different take." in coloured.stdout  # additions green
    assert "\x1b[31m-Alice prefers async" in coloured.stdout  # removals red


def test_wait_exits_1_when_the_refresh_fails(stack: LiveStack) -> None:
    fail_every_llm_call(stack.llm)
    result = hindsight(stack, "mental-model", "create", BANK, "Team", QUERY, "--id", "doomed",
                       "--wait")
    assert result.returncode == 1, (result.stdout, result.stderr)
    body = json.loads(result.stdout)
    assert body["operation"]["status"] == "failed"
    assert body["operation"]["details"]["failure_reason"]
    again = hindsight(stack, "mental-model", "refresh", BANK, "doomed", "--wait", "-o", "table")
    assert again.returncode == 1 and "failed" in again.stdout
    reason = json.loads(result.stdout)["operation"]["details"]["failure_reason"]
    assert re.search(rf"operation \S+: failed, outcome refresh_failed_\w+, reason {reason}",
                     " ".join(again.stdout.split())), again.stdout
    # the failure shows in the history (red failure entry in table mode)
    history = ok_json(hindsight(stack, "mental-model", "history", BANK, "doomed"))
    assert history and history[0]["kind"] == "refresh_failed"


def test_a_404_and_a_422_are_one_readable_line_with_exit_1(stack: LiveStack) -> None:
    missing = one_error_line(hindsight(stack, "mental-model", "get", BANK, "does-not-exist"))
    assert missing.startswith("Error: HTTP 404:") and "does-not-exist" in missing
    bad = one_error_line(hindsight(stack, "mental-model", "create", BANK, "n", "q",
                                   "--id", "Bad ID!"))
    assert bad.startswith("Error: HTTP 422: body.id: id must match ^[a-z0-9][a-z0-9-]{0,63}$")
    cron = one_error_line(hindsight(stack, "mental-model", "create", BANK, "n", "q",
                                    "--refresh-cron", "every day"))
    assert cron.startswith("Error: HTTP 422: body.trigger.refresh_cron:")
    unreachable = one_error_line(hindsight(stack, "--api-url", "http://127.0.0.1:9",
                                           "bank", "list"))
    assert unreachable.startswith("Error: cannot reach the Hindsight API at http://127.0.0.1:9")
    usage = hindsight(stack, "mental-model", "update", BANK, "x", "--trigger-keep-trace", "maybe")
    assert usage.returncode == 2 and "Traceback" not in usage.stderr


def test_operations_and_banks(stack: LiveStack) -> None:
    write_documents(stack.llm, {QUERY: DOC})
    created = ok_json(hindsight(stack, "mental-model", "create", BANK, "Team", QUERY,
                                "--id", "team", "--wait"))
    op_id = created["operation_id"]
    op = ok_json(hindsight(stack, "operation", "get", BANK, op_id))
    assert op["status"] == "completed" and op["mental_model_id"] == "team"
    ops = ok_json(hindsight(stack, "operation", "list", BANK, "--status", "completed"))
    assert op_id in [o["id"] for o in ops["operations"]]
    conflict = one_error_line(hindsight(stack, "operation", "cancel", BANK, op_id))
    assert conflict.startswith("Error: HTTP 409:")
    unknown = one_error_line(hindsight(stack, "operation", "get", BANK,
                                       "00000000-0000-0000-0000-000000000000"))
    assert "not found" in unknown

    banks = ok_json(hindsight(stack, "bank", "list"))
    assert BANK in [b["bank_id"] for b in banks["banks"]]
    stats = ok_json(hindsight(stack, "bank", "stats", BANK))
    assert stats["bank_id"] == BANK and stats["total_nodes"] >= 3


def test_api_key_is_sent(stack: LiveStack, settings: Any) -> None:
    import dataclasses

    settings.HINDSIGHT = dataclasses.replace(settings.HINDSIGHT, tenant_api_key="k3y")
    refused = one_error_line(hindsight(stack, "bank", "list"))
    assert refused.startswith("Error: HTTP 401:")
    assert ok_json(hindsight(stack, "bank", "list", env={"HINDSIGHT_API_KEY": "k3y"}))
    assert ok_json(hindsight(stack, "--api-key", "k3y", "bank", "list"))


# The command-line example of docs/clients.md up to the model's first page, as a user runs it
# (curl, then the console script) after its `export PATH=… HINDSIGHT_URL=… BANK_ID=…` line: a
# memory stored under the model's tag first, or the page the model scopes to it stays empty.
FIRST_STEPS = """\
curl -s -X PUT "$HINDSIGHT_URL/v1/default/banks/$BANK_ID" -H 'Content-Type: application/json' -d '{}'
curl -s -X POST "$HINDSIGHT_URL/v1/default/banks/$BANK_ID/memories" \\
  -H 'Content-Type: application/json' -d '{"items": [{"strategy": "verbatim", "tags": ["projects"],
    "content": "Alice is moving the billing service to PostgreSQL 18."}]}'
hindsight mental-model create "$BANK_ID" "Current Projects" \\
  "Which projects is the user currently working on?" \\
  --id current-projects --tags projects,mental-model --tags-match any --wait
hindsight mental-model list "$BANK_ID"
hindsight mental-model get "$BANK_ID" current-projects
"""
PROJECTS_QUERY = "Which projects is the user currently working on?"
PROJECTS_PAGE = "## Projects\n\nAlice is moving the billing service to PostgreSQL 18."


def test_the_docs_first_steps_store_a_memory_then_leave_a_page_with_content(
        live_stack: LiveStack) -> None:
    assert HINDSIGHT, "the hindsight console script is not installed in this venv (make install)"
    block = re.search(r"```sh\n(export PATH=.*?)```", CLIENTS_DOC.read_text(), re.S)
    assert block and FIRST_STEPS in block.group(1), "docs/clients.md's example drifted from this"
    write_documents(live_stack.llm, {PROJECTS_QUERY: PROJECTS_PAGE})
    ran = subprocess.run(
        ["bash", "-e", "-c", FIRST_STEPS], capture_output=True, text=True, timeout=180,
        env={**os.environ, "PATH": f"{Path(HINDSIGHT).parent}:{os.environ['PATH']}",
             "HINDSIGHT_URL": live_stack.url, "BANK_ID": "first-steps"})
    assert ran.returncode == 0, ran.stdout + ran.stderr
    # Piped, so JSON on stdout; how the refresh ended is said on stderr all the same.
    assert re.search(r"operation \S+: completed, outcome content_written", ran.stderr), ran.stderr
    model = json.loads(ran.stdout[ran.stdout.rindex('{\n  "id"'):])
    assert model["content"] == PROJECTS_PAGE


def test_wait_prints_the_outcome_of_a_refresh_that_wrote_nothing(stack: LiveStack) -> None:
    # No memory carries the model's tag: the refresh completes, and says it wrote nothing.
    write_documents(stack.llm, {QUERY: DOC})
    table = hindsight(stack, "-o", "table", "mental-model", "create", BANK, "Nobody", QUERY,
                      "--id", "nobody", "--tags", "no-such-tag", "--wait")
    assert table.returncode == 0, table.stderr
    assert re.search(r"operation \S+: completed, outcome content_preserved_no_new_facts "
                     r"\(no memory in the model's scope", table.stdout), table.stdout
    piped = hindsight(stack, "mental-model", "refresh", BANK, "nobody", "--wait")
    assert json.loads(piped.stdout)["operation"]["details"]["outcome"] == (
        "content_preserved_no_new_facts")
    assert "outcome content_preserved_no_new_facts" in piped.stderr
