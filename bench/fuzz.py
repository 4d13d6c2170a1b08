"""Schemathesis over the whole OpenAPI document against a live server (on demand; not a test).

Starts the chaos run's stack (embedded PostgreSQL and Valkey, gunicorn, one Celery worker,
beat, the scripted LLM, so LLM routes answer too), seeds a bank with memories, a mental model
and an operation, and runs the ``schemathesis`` CLI against ``/openapi.json`` with every
phase — examples, coverage, fuzzing and stateful (the links schemathesis finds or infers
between operations) — and the checks that matter: no 5xx, and every answer matching its
documented status code, content type and body schema. ``--max-examples`` per operation (default
100) gives well over 2,000 generated requests over the document's operations.

It prints schemathesis' own summary, then its count of requests and the server's (gunicorn's
access log): requests served, responses ≥ 500. Exit code non-zero if schemathesis found a
failure or any response was ≥ 500, or fewer than ``--min-requests`` requests were made.

    .venv/bin/python -m bench.fuzz
    .venv/bin/python -m bench.fuzz --max-examples 30 --min-requests 500
"""

from __future__ import annotations

import re
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from bench.chaos_stack import ChaosLLM, Stack
from bench.harness import argument_parser, call_json

CHECKS = ",".join([
    "not_a_server_error", "status_code_conformance", "content_type_conformance",
    "response_schema_conformance",
])


def seed(stack: Stack) -> None:
    """A bank with something in it, so the routes with ids reach their services sometimes."""

    def send(method: str, path: str, body: object) -> None:
        call_json(stack.base_url, method, path, body, timeout=30)

    send("PUT", "/v1/default/banks/fuzz", {"name": "fuzz"})
    send("POST", "/v1/default/banks/fuzz/memories", {"items": [
        {"content": "Alice leads the platform team.", "tags": ["team"], "strategy": "verbatim"},
        {"content": "Bob runs the on-call rota.", "tags": ["ops"], "strategy": "verbatim"}]})
    send("POST", "/v1/default/banks/fuzz/mental-models",
         {"id": "team", "name": "Team", "source_query": "Who leads? [chaos:team]",
          "tags": ["team"]})


def main() -> int:
    parser = argument_parser("bench.fuzz", __doc__)
    parser.add_argument("--max-examples", type=int, default=100)
    parser.add_argument("--min-requests", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=14)
    parser.add_argument("--phases", default="examples,coverage,fuzzing,stateful")
    args = parser.parse_args()

    scratch = Path(tempfile.mkdtemp(prefix="fuzz-"))
    # A fast LLM: fuzzing is about answers, not latency, and a generated 1,000-item retain
    # (the documented maximum) makes one extraction call per item inside its request.
    llm = ChaosLLM(delay=(0.0, 0.01))
    stack = Stack(scratch, concurrency=2, llm=llm)
    try:
        stack.start(workers=1)
        seed(stack)
        ndjson = scratch / "events.ndjson"
        started = time.monotonic()
        run = subprocess.run(
            [str(Path(sys.executable).parent / "schemathesis"), "--no-color", "run",
             stack.base_url + "/openapi.json", "--url", stack.base_url,
             "--include-path-regex", "^/v1/", "--phases", args.phases,
             "--checks", CHECKS, "--max-examples", str(args.max_examples),
             "--seed", str(args.seed), "--continue-on-failure", "--request-timeout", "60",
             "--report", "ndjson", "--report-ndjson-path", str(ndjson),
             "--suppress-health-check", "all"],
            cwd=scratch, capture_output=True, text=True, env=stack.env)
        elapsed = time.monotonic() - started
        print(run.stdout[-12000:])
        if run.returncode not in (0, 1):
            print(run.stderr[-4000:])
        served = stack.access_log.read_text(errors="replace").splitlines()
        statuses = Counter(int(m.group(1)) for line in served
                           if (m := re.search(r" (\d{3})$", line)))
        v1 = sum(1 for line in served if " /v1/" in line)
        errors = sum(n for status, n in statuses.items() if status >= 500)
        print(f"\n# server side: {len(served)} requests served ({v1} under /v1) in {elapsed:.0f} s; "
              f"responses >= 500: {errors}; by status: {dict(sorted(statuses.items()))}")
        print(f"# schemathesis exit code {run.returncode} (0: no failure found)")
        ok = run.returncode == 0 and errors == 0 and v1 >= args.min_requests
        if v1 < args.min_requests:
            print(f"FAILED: only {v1} generated requests (wanted >= {args.min_requests})")
        return 0 if ok else 1
    finally:
        stack.stop()
        llm.server.stop()


if __name__ == "__main__":
    sys.exit(main())
