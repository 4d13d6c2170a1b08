"""Child process of the coalescing test: starts Django once, then forks PROCESSES processes; in
each, THREADS threads, each with its own database connection, submit PER_THREAD times for one
key. Every thread connects first and all start together (a barrier across the processes).
Prints one JSON report: the processes' ids, every id the submits returned, any errors.

Forked, not started: each is an OS process of its own with its own connections, as the test
needs, without paying Django's start-up once per process (about a CPU-second each).

Run: python -m tests.operations.coalesce_child KEY PROCESSES THREADS PER_THREAD
(environment: HINDSIGHT_API_DATABASE_URL / _REDIS_URL / _TASK_QUEUE of the test).
"""

from __future__ import annotations

import json
import os
import sys
import threading
from typing import Any

from tests.racers import START_TIMEOUT_SECONDS, django_once, race


def submitting_process(key: str, threads: int, per_thread: int, start: Any, reports: Any) -> None:
    from django.db import connection

    from operations.queue import operation_submit

    ids: list[str] = []
    errors: list[str] = []
    guard = threading.Lock()

    def submitter() -> None:
        try:
            connection.ensure_connection()
            start.wait(START_TIMEOUT_SECONDS)
            for _ in range(per_thread):
                result = operation_submit(
                    bank_id="coalesce-bank", operation_type="test.job", dedupe_key=key,
                    automatic=True, payload={"from": os.getpid()},
                )
                with guard:
                    ids.append(str(result.operation.id))
        except Exception as exc:  # reported to the parent, which fails the test
            start.abort()  # the other threads stop waiting for one that will never come
            with guard:
                errors.append(repr(exc))
        finally:
            connection.close()

    try:
        workers = [threading.Thread(target=submitter) for _ in range(threads)]
        for t in workers:
            t.start()
        for t in workers:
            t.join()
    finally:  # the parent waits for one report per process
        reports.put({"pid": os.getpid(), "ids": ids, "errors": errors})


def main() -> None:
    key, processes, threads, per_thread = sys.argv[1], *map(int, sys.argv[2:5])
    django_once("operations.queue")
    received, lost = race(submitting_process, [(key, threads, per_thread)] * processes,
                          parties=processes * threads)
    print(json.dumps({
        "pids": [r["pid"] for r in received],
        "ids": [i for r in received for i in r["ids"]],
        "errors": [e for r in received for e in r["errors"]]
        + [f"a process exited with {code}" for code in lost],
    }))


if __name__ == "__main__":
    main()
