"""The chaos run at its bounded size (``python -m bench.chaos --quick``), as part of ``make test``.

Its own stack (embedded PostgreSQL and Valkey, gunicorn with one process, two Celery worker
processes of two prefork children, beat, the scripted LLM at 50–300 ms), six models (full,
tagged, delta, ``refresh_after_consolidation``, cron with a rate floor) refreshed in rounds
while retains arrive, a SIGKILL of a worker child holding a refresh, another right after a
PATCH superseded its refresh, one broker restart, PATCHes during refreshes and an LLM outage.
No worker process ends by itself: the broker restart, with tasks running and prefetched, once
ended workers with Celery's "Unrecoverable error" (``hindsight.project.consumer``). Every count
that must be 0 is asserted 0, so a regression names the guarantee it broke. About 50 s on 2
cores.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def test_bounded_chaos_run_loses_nothing_and_never_overlaps(tmp_path: Path) -> None:
    report = tmp_path / "chaos.json"
    run = subprocess.run(
        [sys.executable, "-m", "bench.chaos", "--quick", "--json", str(report)],
        cwd=REPO, capture_output=True, text=True, timeout=240,
    )
    assert report.exists(), run.stdout[-4000:] + run.stderr[-4000:]
    result = json.loads(report.read_text())

    assert result["must_be_zero"] == {
        "operations_lost": 0,
        "operations_stuck": 0,
        "torn_documents": 0,
        "overlapping_refreshes": 0,
        "lost_edits": 0,
        "duplicate_effects": 0,
        "lost_retains": 0,
        "failed_although_work_completed": 0,
    }, json.dumps(result["details"], indent=2)
    # The faults were injected, and the kill hit a refresh that was then claimed again.
    assert "broker restarted (queue lost)" in result["faults"], result["faults"]
    assert any(f.startswith("SIGKILL child") for f in result["faults"]), result["faults"]
    assert not any("exited by itself" in f for f in result["faults"]), result["faults"]
    recovery = result["kill_to_recovered_claim_s"]
    assert recovery["kills_holding_a_refresh"] >= 1, (recovery, result["faults"])
    assert recovery["recovered"] == recovery["kills_holding_a_refresh"], recovery
    # One kill came right after a PATCH superseded the refresh: its follow-up was claimed too
    # (and carried the edit: lost_edits is 0).
    assert recovery["kills_after_an_edit"] == 1, (recovery, result["faults"])
    assert len(recovery["after_an_edit_to_the_follow_up_claim"]) == 1, recovery
    # Work happened: operations completed and the LLM answered.
    assert result["operations_by_status"].get("completed", 0) > 10, result["operations_by_status"]
    assert result["llm_requests"]["for_models"] > 0

    outage = result["llm_outage"]
    assert outage["requests_per_operation"] <= outage["requests_per_operation_max_allowed"]
    assert outage["requests_while_paused"] == 0
    assert outage["ended_failed"] == outage["operations"]  # failed visibly, not lost
    assert outage["resumed_by_manual_refresh"] == outage["models"]
    assert run.returncode == 0, run.stdout[-4000:]
