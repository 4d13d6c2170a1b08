"""Network cuts at their bounded size (``python -m bench.chaos --cuts --quick``), in ``make test``.

Its own stack (embedded PostgreSQL and Valkey, gunicorn, beat, one worker, and one more that
reaches PostgreSQL and the broker only through ``bench.netcut`` proxies; the scripted LLM). While
that worker runs a refresh, the proxies hold its bytes until its peer has taken the refresh over
and finished it — past its key lock's TTL (3 s) and the sweep's silence threshold (6 s); at most
12 s — then deliver them late. Its peer must take the refresh over during the cut, the cut
worker's late statements must not land (no answer it was given for that model is ever the
model's content), it must serve again after the heal, and nothing may be stuck. About 35 s on
2 cores.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def test_a_worker_cut_off_the_network_is_taken_over_writes_nothing_late_and_serves_again(
    tmp_path: Path,
) -> None:
    report = tmp_path / "cuts.json"
    run = subprocess.run(
        [sys.executable, "-m", "bench.chaos", "--cuts", "--quick", "--json", str(report)],
        cwd=REPO, capture_output=True, text=True, timeout=240,
    )
    assert report.exists(), run.stdout[-4000:] + run.stderr[-4000:]
    result = json.loads(report.read_text())

    assert result["must_be_zero"] == {
        "cuts_not_injected": 0,
        "cuts_not_taken_over": 0,
        "stale_writes": 0,
        "operations_lost": 0,
        "operations_stuck": 0,
        "torn_documents": 0,
        "overlapping_refreshes": 0,
        "cut_worker_not_serving_after_heal": 0,
    }, json.dumps(result, indent=2)
    [cut] = result["cuts"]
    # Taken over while the bytes were still held, and its work then completed by the peer.
    assert cut["takeover_s"] < result["size"]["cut_seconds"], cut
    assert cut["takeover_s"] <= cut["held_s"], cut
    assert cut["final_status"] == "completed", cut
    assert result["served_after_heal"] >= 1
    # The stale-write check had something to find: after the heal the cut worker carried on
    # and was given an answer for the model, which its write then had to refuse.
    assert result["answers_to_the_cut_worker_after_its_cut"] >= 1, result
    assert run.returncode == 0, run.stdout[-4000:]
