"""``hindsight kb …`` in-process (typer's runner) against the live server over HTTP: each
command's JSON output is the API's answer; the table output says what happened; a refused call
is one line and exit code 1."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.factories import make_bank
from tests.surfaces.cli.invoke import as_json, cli_against

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.integration]

BANK = "cli-kb"


@pytest.fixture
def kb(live_server):
    make_bank(BANK)
    return cli_against(live_server.url)


def test_the_kb_commands_build_read_move_search_export_and_delete(kb, tmp_path: Path):
    ops = as_json(kb("-o", "json", "kb", "create-folder", BANK, "Ops"))
    assert ops["kind"] == "folder"
    inner = as_json(kb("-o", "json", "kb", "create-folder", BANK, "Inner", "--parent", ops["id"]))
    page = as_json(kb("-o", "json", "kb", "create-page", BANK, "Runbook", "How do we deploy?",
                      "--parent", ops["id"], "--tags", "ops,deploy", "--trigger-mode", "full",
                      "--fact-types", "world,observation", "--max-tokens", "1024"))
    assert page["page_id"].startswith("kp-") and page["operation_id"]

    tree = as_json(kb("-o", "json", "kb", "tree", BANK))
    [root] = tree["roots"]
    assert [c["name"] for c in root["children"]] == ["Inner", "Runbook"]
    runbook = root["children"][1]
    assert runbook["trigger"]["mode"] == "full" and runbook["tags"] == ["ops", "deploy"]
    assert runbook["trigger"]["fact_types"] == ["world", "observation"]
    assert as_json(kb("-o", "json", "kb", "tree", BANK, "--tags", "nothing",
                      "--tags-match", "any_strict")) == {"roots": []}
    table = kb("-o", "table", "kb", "tree", BANK).stdout
    assert "Ops/" in table and "Runbook" in table and page["page_id"] in table

    read = as_json(kb("-o", "json", "kb", "get", BANK, page["page_id"]))
    assert read["description"] == "How do we deploy?"
    assert kb("kb", "get", BANK, page["page_id"], "--markdown").stdout.endswith(
        "---\n\nNo content yet.\n")

    moved = as_json(kb("-o", "json", "kb", "move", BANK, page["page_id"], "--to", inner["id"]))
    assert moved["parent_id"] == inner["id"]
    assert as_json(kb("-o", "json", "kb", "move", BANK, inner["id"], "--root"))["parent_id"] is None
    assert as_json(kb("-o", "json", "kb", "rename", BANK, page["page_id"], "Deploy runbook")
                   )["name"] == "Deploy runbook"
    refused = kb("kb", "move", BANK, ops["id"], "--to", ops["id"], code=1)
    # In-process the refusal comes out as the ApiError the console script prints on one line.
    assert str(refused.exception) == "HTTP 400: parent_id: A node cannot be its own parent"
    kb("kb", "move", BANK, ops["id"], code=2)  # neither --to nor --root

    hits = as_json(kb("-o", "json", "kb", "search", BANK, "deploy runbook", "--limit", "5"))
    assert hits["results"][0]["id"] == page["page_id"]
    assert "Deploy runbook" in kb("-o", "table", "kb", "search", BANK, "deploy").stdout

    out = tmp_path / "bundle"
    kb("kb", "export", BANK, "--dir", str(out))
    assert sorted(p.name for p in out.iterdir()) == sorted(["index.md", f"{page['page_id']}.md"])
    assert "[Deploy runbook]" in (out / "index.md").read_text()
    bundle = as_json(kb("-o", "json", "kb", "export", BANK))
    assert [f["path"] for f in bundle["files"]][0] == "index.md"

    assert as_json(kb("-o", "json", "kb", "delete", BANK, inner["id"], "-y")) == {
        "status": "deleted"}
    assert [n["name"] for n in as_json(kb("-o", "json", "kb", "tree", BANK))["roots"]] == ["Ops"]
    gone = kb("kb", "get", BANK, page["page_id"], code=1)
    assert str(gone.exception) == f"HTTP 404: Knowledge page '{page['page_id']}' not found"
