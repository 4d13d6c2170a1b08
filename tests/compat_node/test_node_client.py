"""The official npm client ``@vectorize-io/hindsight-client`` 0.9.1 on Node 20 against the live
server (real worker, scripted LLM): ``drive.mjs`` calls the client's own methods and asserts
the bodies they return.

The package comes from this folder's ``package.json`` + ``package-lock.json`` through
``npm ci`` (run here, once per session), so ``make test`` on a fresh clone installs it. Node and
npm come from the machine: without them the test fails naming what to install — never a skip.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.live import LiveStack, write_documents

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.integration]

HERE = Path(__file__).resolve().parent
MIN_NODE_MAJOR = 20
PINNED = "0.9.1"

ENV = {
    "BANK": "node-compat",
    "QUERY_1": "How does the team communicate?",
    "QUERY_2": "How does the whole team communicate today?",
    "DOC_1": "## Team\n\nAlice prefers async; Bob runs the Monday standup.",
    "DOC_2": "## Team\n\nAlice prefers async; Bob runs standups; Dana likes email.",
    "DOC_DRY": "## Team\n\nA different take.",
}


def _require(tool: str) -> str:
    path = shutil.which(tool)
    if path is None:
        pytest.fail(
            f"`{tool}` is not on PATH: the npm client test needs Node.js >= {MIN_NODE_MAJOR} "
            "with npm (Debian/Ubuntu: `apt-get install nodejs npm`, or https://nodejs.org)",
            pytrace=False,
        )
    return path


@pytest.fixture(scope="session")
def node_client() -> Iterator[str]:
    """``node`` with the pinned client installed by ``npm ci`` in this folder."""
    node, npm = _require("node"), _require("npm")
    version = subprocess.run([node, "--version"], capture_output=True, text=True).stdout.strip()
    match = re.match(r"v(\d+)\.", version)
    if not match or int(match.group(1)) < MIN_NODE_MAJOR:
        pytest.fail(f"Node.js {version or '?'} found; the npm client needs Node.js >= "
                    f"{MIN_NODE_MAJOR}", pytrace=False)
    installed = HERE / "node_modules" / "@vectorize-io" / "hindsight-client" / "package.json"
    lock = HERE / "package-lock.json"
    if not installed.exists() or installed.stat().st_mtime < lock.stat().st_mtime:
        done = subprocess.run([npm, "ci", "--ignore-scripts", "--no-audit", "--no-fund"],
                              cwd=HERE, capture_output=True, text=True, timeout=300)
        if done.returncode != 0:
            pytest.fail(f"`npm ci` in {HERE} failed:\n{done.stdout}\n{done.stderr}",
                        pytrace=False)
    assert json.loads(installed.read_text())["version"] == PINNED
    yield node


def test_the_npm_client_drives_the_mental_model_lifecycle(live_stack: LiveStack,
                                                          node_client: str) -> None:
    write_documents(live_stack.llm, {
        ENV["QUERY_1"]: ENV["DOC_1"],
        ENV["QUERY_2"]: [ENV["DOC_2"], ENV["DOC_DRY"]],  # the refresh, then the dry run
    })
    result = subprocess.run(
        [node_client, str(HERE / "drive.mjs")], cwd=HERE, capture_output=True, text=True,
        timeout=240, env={**os.environ, **ENV, "HINDSIGHT_URL": live_stack.url},
    )
    assert result.returncode == 0, f"node failed:\n{result.stdout}\n{result.stderr}"
    summary = json.loads(result.stdout.strip().splitlines()[-1])
    assert summary["ok"] is True
    assert summary["steps"] == [
        "createBank", "retain", "createMentalModel", "listMentalModels", "getMentalModel",
        "updateMentalModel", "refreshMentalModel", "dryRunRefreshMentalModel",
        "clearMentalModel", "getMentalModelHistory", "operations",
        "triggerKeysDroppedAndTheSdkWorkaround", "deleteMentalModel",
    ]


def test_a_missing_node_fails_naming_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(shutil, "which", lambda tool: None)
    with pytest.raises(pytest.fail.Exception, match=r"`node` is not on PATH.*Node\.js >= 20"):
        _require("node")
