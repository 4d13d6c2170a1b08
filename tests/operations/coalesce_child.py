"""Child process of the coalescing test: N threads, each with its own database connection,
submit M times for one key starting at a shared wall-clock instant; prints the ids as JSON.

Run: python -m tests.operations.coalesce_child KEY THREADS PER_THREAD START_AT
(environment: HINDSIGHT_API_DATABASE_URL / _REDIS_URL / _TASK_QUEUE of the test).
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time


def main() -> None:
    key, threads, per_thread, start_at = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(
        sys.argv[4]
    )
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "hindsight.project.settings")
    import django

    django.setup()
    from django.db import connection

    from operations.queue import operation_submit

    ids: list[str] = []
    errors: list[str] = []
    guard = threading.Lock()
    barrier = threading.Barrier(threads)

    def submitter() -> None:
        try:
            connection.ensure_connection()
            barrier.wait()
            time.sleep(max(0.0, start_at - time.time()))
            for _ in range(per_thread):
                result = operation_submit(
                    bank_id="coalesce-bank", operation_type="test.job", dedupe_key=key,
                    automatic=True, payload={"from": os.getpid()},
                )
                with guard:
                    ids.append(str(result.operation.id))
        except Exception as exc:  # reported to the parent, which fails the test
            with guard:
                errors.append(repr(exc))
        finally:
            connection.close()

    workers = [threading.Thread(target=submitter) for _ in range(threads)]
    for t in workers:
        t.start()
    for t in workers:
        t.join()
    print(json.dumps({"ids": ids, "errors": errors}))


if __name__ == "__main__":
    main()
