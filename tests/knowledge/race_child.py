"""Child process of the tree race test: starts Django once, then forks two processes: one moves
folder A under folder B and back to the root, the other B under A and back, ITERATIONS times
each, both starting together (a barrier, once each is connected); prints their two JSON reports
as a list.

``service`` moves through ``knowledge_node_update`` (the tree lock, then the checks); ``raw``
writes the rows past the services — it reads the tree, sees no cycle, waits a moment (the window
a racing writer needs) and updates ``parent_id``: only the database's trigger stands between two
such writers and a cycle.

Forked, not started: each racer is an OS process of its own with its own connection, without
paying Django's start-up twice.

Run: python -m tests.knowledge.race_child MODE BANK A B ITERATIONS
(environment: HINDSIGHT_API_DATABASE_URL of the test).
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any

from tests.racers import START_TIMEOUT_SECONDS, django_once, race


def mover(mode: str, bank: str, mover: str, target: str, iterations: int, start: Any,
         reports: Any) -> None:
    from django.db import IntegrityError, connection, transaction

    from hindsight.infra.errors import BadRequest
    from mentalmodels.knowledge.models import KnowledgeNode
    from mentalmodels.knowledge.services import NodeUpdate, knowledge_node_update

    def raw_move(parent: str | None) -> None:
        with transaction.atomic():
            parents = dict(KnowledgeNode.objects.filter(bank_id=bank)
                           .values_list("id", "parent_id"))
            cursor = parent
            while cursor is not None:
                if cursor == mover:
                    raise BadRequest("cycle seen before writing")
                cursor = parents.get(cursor)
            time.sleep(0.002)
            KnowledgeNode.objects.filter(id=mover).update(parent_id=parent)

    def service_move(parent: str | None) -> None:
        knowledge_node_update(bank_id=bank, node_id=mover, update=NodeUpdate(parent_id=parent))

    do_move = raw_move if mode == "raw" else service_move
    report: dict[str, Any] = {"pid": os.getpid(), "moved": 0, "refused_by_check": 0,
                              "refused_by_database": 0, "errors": []}
    try:
        connection.ensure_connection()
        start.wait(START_TIMEOUT_SECONDS)
        for _ in range(iterations):
            for parent in (target, None):
                try:
                    do_move(parent)
                    report["moved"] += 1
                except BadRequest:
                    report["refused_by_check"] += 1
                except IntegrityError as exc:
                    if "cycle" not in str(exc):
                        report["errors"].append(str(exc))
                    report["refused_by_database"] += 1
                except Exception as exc:  # reported to the parent, which fails the test
                    report["errors"].append(repr(exc))
    except Exception as exc:  # not connected, or the other racer never came
        start.abort()  # the other racer stops waiting for one that will never come
        report["errors"].append(repr(exc))
    finally:
        connection.close()
        reports.put(report)


def main() -> None:
    mode, bank, a, b = sys.argv[1:5]
    iterations = int(sys.argv[5])
    django_once("mentalmodels.knowledge.services")
    received, lost = race(mover, [(mode, bank, a, b, iterations), (mode, bank, b, a, iterations)],
                          parties=2)
    received[0]["errors"].extend(f"a racer exited with {code}" for code in lost)
    print(json.dumps(received))


if __name__ == "__main__":
    main()
