"""Coalescing is the database's: many OS processes and connections submitting for one key at
once end with exactly one pending operation, and every caller got its id."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from django.db import IntegrityError, transaction

from hindsight.banks.models import Bank
from operations.models import PENDING, Operation
from tests.workers import REPO_ROOT, WorkerFactory, _purge_queue, apply_test_settings

PROCESSES, THREADS, PER_THREAD = 8, 8, 8  # 512 submits over 64 connections


@pytest.mark.integration
def test_concurrent_submits_from_many_processes_create_exactly_one_pending_operation(
    transactional_db, settings, tmp_path
) -> None:
    apply_test_settings(settings, task_queue="coalesce-test-nobody-consumes")
    Bank.objects.create(id="coalesce-bank")
    env = WorkerFactory(tmp_path, settings).env()
    # One child starts Django and forks the PROCESSES submitting processes (coalesce_child).
    child = subprocess.Popen(
        [sys.executable, "-m", "tests.operations.coalesce_child", "hot-key", str(PROCESSES),
         str(THREADS), str(PER_THREAD)],
        cwd=REPO_ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )
    try:
        out, err = child.communicate(timeout=120)
        assert child.returncode == 0, err.decode()[-2000:]
        report = json.loads(out.decode().strip().splitlines()[-1])
        assert report["errors"] == []
        ids = report["ids"]
    finally:
        if child.poll() is None:
            child.kill()
        _purge_queue(env["HINDSIGHT_API_REDIS_URL"], "coalesce-test-nobody-consumes")

    assert len(set(report["pids"]) - {child.pid}) == PROCESSES  # processes of their own
    assert len(ids) == PROCESSES * THREADS * PER_THREAD
    pending = list(Operation.objects.filter(dedupe_key="hot-key"))
    assert len(pending) == 1 and pending[0].status == PENDING
    assert set(ids) == {str(pending[0].id)}  # every caller got the one operation's id
    with pytest.raises(IntegrityError), transaction.atomic():
        Operation.objects.create(bank_id="coalesce-bank", operation_type="test.job",
                                 dedupe_key="hot-key", status=PENDING)
