"""The README's quickstart, extracted from the README and run as written (in a fresh Python)
against a live server, a real worker and the scripted OpenAI-compatible LLM."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.llm_server import Reply

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.integration]

README = Path(__file__).resolve().parent.parent / "README.md"
WRITTEN_URL = "http://127.0.0.1:8888"


def quickstart_code() -> str:
    match = re.search(r"<!-- quickstart -->\n```python\n(.*?)\n```", README.read_text(), re.S)
    assert match, "README.md has no <!-- quickstart --> python block"
    return match.group(1)


def test_the_quickstart_says_how_to_connect_an_openai_compatible_llm() -> None:
    text = README.read_text()
    for variable in ("HINDSIGHT_API_LLM_PROVIDER=openai", "HINDSIGHT_API_LLM_BASE_URL=",
                     "HINDSIGHT_API_LLM_API_KEY=", "HINDSIGHT_API_LLM_MODEL="):
        assert f"export {variable}" in text
    base_url = re.search(r"export HINDSIGHT_API_LLM_BASE_URL=(\S+)", text)
    assert base_url and base_url.group(1).endswith("/v1")
    code = quickstart_code()
    assert WRITTEN_URL in code and "client.close()" in code


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


@pytest.mark.timeout(300)
def test_the_readme_quickstart_runs_as_written(live_server, scripted_llm, openai_embeddings,
                                               worker_factory, tmp_path: Path) -> None:
    a_model_that_reads_its_memories(scripted_llm)
    worker_factory(env=scripted_llm.env)
    script = tmp_path / "quickstart.py"
    # As written, but pointed at this test's server instead of make run's default port.
    script.write_text(quickstart_code().replace(WRITTEN_URL, live_server.url))
    result = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                            timeout=240, cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    assert "first refresh: completed content_written" in out
    assert "- Alice prefers async standups" in out and "- Bob runs the Monday planning" in out
    assert "stale: True" in out
    assert "refresh: completed content_written" in out
    assert "- Carol joined and prefers written updates" in out
    history = [line for line in out.splitlines() if line.startswith("history:")]
    assert len(history) == 2 and all(" version " in line for line in history)
    assert "Unclosed client session" not in result.stderr
    assert "Traceback" not in result.stderr


CURL_DOC = README.parent / "docs" / "quickstart-curl.md"


@pytest.mark.timeout(300)
def test_the_curl_quickstart_runs_as_written(live_server, scripted_llm, openai_embeddings,
                                             worker_factory) -> None:
    match = re.search(r"<!-- quickstart-curl -->\n```sh\n(.*?)\n```", CURL_DOC.read_text(), re.S)
    assert match, "docs/quickstart-curl.md has no <!-- quickstart-curl --> sh block"
    a_model_that_reads_its_memories(scripted_llm)
    worker_factory(env=scripted_llm.env)
    script = match.group(1).replace(WRITTEN_URL, live_server.url)
    result = subprocess.run(["bash", "-e", "-c", script], capture_output=True, text=True,
                            timeout=240)
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    assert len(re.findall(r"operation [0-9a-f-]{36}: completed", out)) == 2, out
    assert "- Carol joined and prefers written updates" in out
    assert "\nTrue\n" in out  # stale after the new memory
    assert out.rstrip().endswith("- Bob runs the Monday planning meeting"), out
