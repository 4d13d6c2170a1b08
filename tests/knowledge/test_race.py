"""Two processes move two folders under each other at once, many times: the stored tree never
holds a cycle — through the services (their tree lock), and written past them (the database's
trigger alone)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from mentalmodels.knowledge.models import KnowledgeNode
from mentalmodels.knowledge.services import knowledge_folder_create
from tests.workers import WorkerFactory

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.integration]

REPO_ROOT = Path(__file__).resolve().parents[2]
ITERATIONS = 150


def _cycle(bank: str) -> list[str] | None:
    parents = dict(KnowledgeNode.objects.filter(bank_id=bank).values_list("id", "parent_id"))
    for start in parents:
        seen, cursor = [], start
        while cursor is not None:
            if cursor in seen:
                return seen
            seen.append(cursor)
            cursor = parents.get(cursor)
    return None


@pytest.mark.parametrize("mode", ["service", "raw"])
def test_two_processes_moving_two_folders_under_each_other_never_store_a_cycle(
    mode, tmp_path, settings
):
    bank = f"race-{mode}"
    a = knowledge_folder_create(bank_id=bank, name="A")
    b = knowledge_folder_create(bank_id=bank, name="B")
    env = WorkerFactory(tmp_path, settings).env()
    # One child starts Django and forks the two racers (race_child).
    child = subprocess.Popen(
        [sys.executable, "-m", "tests.knowledge.race_child", mode, bank, a.id, b.id,
         str(ITERATIONS)],
        cwd=REPO_ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )
    try:
        out, err = child.communicate(timeout=120)
        assert child.returncode == 0, err.decode()[-2000:]
        reports = json.loads(out.decode().strip().splitlines()[-1])
    finally:
        if child.poll() is None:
            child.kill()
    assert len({r["pid"] for r in reports} - {child.pid}) == 2  # two processes of their own
    assert [r["errors"] for r in reports] == [[], []]
    assert _cycle(bank) is None
    assert all(r["moved"] > 0 for r in reports)
    refused = sum(r["refused_by_check"] + r["refused_by_database"] for r in reports)
    assert refused > 0  # the two really raced: some moves met the other folder above them
    if mode == "raw":
        # Past the services, the checks each writer made on its own snapshot let racing moves
        # through, and only the trigger refused them.
        assert sum(r["refused_by_database"] for r in reports) > 0
