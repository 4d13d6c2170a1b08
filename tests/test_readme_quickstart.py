"""The quickstarts run as shipped, twice against one server (each run makes its own ids):
``examples/quickstart.py``, the README's short example and the curl quickstart of
docs/getting-started.md, each in a fresh process against a live server, a real worker and the
scripted OpenAI-compatible LLM."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from fakes.llm_server import Reply

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.integration]

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
GETTING_STARTED = ROOT / "docs" / "getting-started.md"
QUICKSTART = ROOT / "examples" / "quickstart.py"
WRITTEN_URL = "http://127.0.0.1:8888"


def marked_block(path: Path, marker: str, language: str) -> str:
    match = re.search(rf"<!-- {marker} -->\n```{language}\n(.*?)\n```", path.read_text(), re.S)
    assert match, f"{path.name} has no <!-- {marker} --> {language} block"
    return match.group(1)


def test_getting_started_says_how_to_connect_an_openai_compatible_llm() -> None:
    text = GETTING_STARTED.read_text()
    for variable in ("HINDSIGHT_API_LLM_PROVIDER=openai", "HINDSIGHT_API_LLM_BASE_URL=",
                     "HINDSIGHT_API_LLM_API_KEY=", "HINDSIGHT_API_LLM_MODEL="):
        assert f"export {variable}" in text
    base_url = re.search(r"export HINDSIGHT_API_LLM_BASE_URL=(\S+)", text)
    assert base_url and base_url.group(1).endswith("/v1")
    assert "examples/quickstart.py" in text and "examples/quickstart.py" in README.read_text()
    assert WRITTEN_URL in QUICKSTART.read_text() and "aclose()" in QUICKSTART.read_text()


def _tool_items(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    for message in messages:
        if message.get("role") != "tool":
            continue
        payload = json.loads(message["content"])
        for key in ("facts", "observations"):
            items += payload.get(key, [])
    return items


def a_model_that_reads_its_memories(server) -> None:  # type: ignore[no-untyped-def]
    """Retain: one fact per item, its text. Reflect: the forced tool turns, then a document
    listing what the tools returned, citing it."""
    lock = threading.Lock()

    def respond(body: dict[str, Any]) -> Reply:
        messages = body["messages"]
        if body.get("response_format"):  # retain's fact extraction
            text = messages[-1]["content"].split("\n\n")[-1]
            return Reply.json({"facts": [{"text": text, "fact_type": "world",
                                          "occurred_start": None, "occurred_end": None}]})
        choice = body.get("tool_choice")
        if isinstance(choice, dict):
            return Reply.tool_calls([(choice["function"]["name"], {"query": "team meetings"})])
        with lock:
            items = {item["id"]: item.get("text", "") for item in _tool_items(messages)}
        answer = "## How the team meets\n\n" + "\n".join(f"- {t}" for t in sorted(items.values()))
        return Reply.tool_calls([("done", {"answer": answer, "memory_ids": sorted(items),
                                           "mental_model_ids": []})])

    server.respond_with(respond)


def run_twice(command: list[str], *, env: dict[str, str] | None = None,
              cwd: Path | None = None) -> list[subprocess.CompletedProcess[str]]:
    runs = []
    for attempt in (1, 2):
        result = subprocess.run(command, capture_output=True, text=True, timeout=240, cwd=cwd,
                                env={**os.environ, **(env or {})})
        assert result.returncode == 0, f"run {attempt}:\n{result.stdout}{result.stderr}"
        runs.append(result)
    return runs


@pytest.mark.timeout(400)
def test_the_quickstart_example_runs_twice_against_one_server(
        live_server, scripted_llm, openai_embeddings, worker_factory, tmp_path: Path) -> None:
    a_model_that_reads_its_memories(scripted_llm)
    worker_factory(env=scripted_llm.env)
    runs = run_twice([sys.executable, str(QUICKSTART)], env={"HINDSIGHT_URL": live_server.url},
                     cwd=tmp_path)
    banks = set()
    for result in runs:
        out = result.stdout
        banks.add(re.search(r"^bank: (\S+)$", out, re.M).group(1))  # type: ignore[union-attr]
        assert "first refresh: completed content_written" in out
        assert "- Alice prefers async standups" in out and "- Bob runs the Monday planning" in out
        assert "stale: True" in out
        assert "refresh: completed content_written" in out
        assert "- Carol joined and prefers written updates" in out
        history = [line for line in out.splitlines() if line.startswith("history:")]
        assert len(history) == 2 and all(" version " in line for line in history)
        assert "Unclosed client session" not in result.stderr
        assert "Traceback" not in result.stderr
    assert len(banks) == 2  # a bank of its own per run


@pytest.mark.timeout(300)
def test_the_readme_example_runs_twice_against_one_server(
        live_server, scripted_llm, openai_embeddings, worker_factory, tmp_path: Path) -> None:
    a_model_that_reads_its_memories(scripted_llm)
    worker_factory(env=scripted_llm.env)
    code = marked_block(README, "example", "python")
    assert WRITTEN_URL in code and len(code.splitlines()) <= 10
    script = tmp_path / "example.py"
    # As written, but pointed at this test's server instead of make run's default port.
    script.write_text(code.replace(WRITTEN_URL, live_server.url))
    for result in run_twice([sys.executable, str(script)], cwd=tmp_path):
        assert "Alice prefers async standups" in result.stdout, result.stdout
        assert re.search(r"operation [0-9a-f-]{36}", result.stdout), result.stdout
        assert "Traceback" not in result.stderr and "Unclosed" not in result.stderr


@pytest.mark.timeout(400)
def test_the_curl_quickstart_runs_twice_against_one_server(
        live_server, scripted_llm, openai_embeddings, worker_factory) -> None:
    script = marked_block(GETTING_STARTED, "quickstart-curl", "sh")
    a_model_that_reads_its_memories(scripted_llm)
    worker_factory(env=scripted_llm.env)
    script = script.replace(WRITTEN_URL, live_server.url)
    for result in run_twice(["bash", "-e", "-c", script]):
        out = result.stdout
        assert len(re.findall(r"operation [0-9a-f-]{36}: completed", out)) == 2, out
        assert "- Carol joined and prefers written updates" in out
        assert "\nTrue\n" in out  # stale after the new memory
        assert out.rstrip().endswith("- Bob runs the Monday planning meeting"), out
