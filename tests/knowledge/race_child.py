"""Child process of the tree race test: moves folder MOVER under folder TARGET and back to the
root, ITERATIONS times, starting at a shared wall-clock instant; prints a JSON report.

``service`` moves through ``knowledge_node_update`` (the tree lock, then the checks); ``raw``
writes the rows past the services — it reads the tree, sees no cycle, waits a moment (the window
a racing writer needs) and updates ``parent_id``: only the database's trigger stands between two
such writers and a cycle.

Run: python -m tests.knowledge.race_child MODE BANK MOVER TARGET ITERATIONS START_AT
(environment: HINDSIGHT_API_DATABASE_URL of the test).
"""

from __future__ import annotations

import json
import os
import sys
import time


def main() -> None:
    mode, bank, mover, target = sys.argv[1:5]
    iterations, start_at = int(sys.argv[5]), float(sys.argv[6])
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "hindsight.project.settings")
    import django

    django.setup()
    from django.db import IntegrityError, transaction

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
    report = {"moved": 0, "refused_by_check": 0, "refused_by_database": 0, "errors": []}
    time.sleep(max(0.0, start_at - time.time()))
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
    print(json.dumps(report))


if __name__ == "__main__":
    main()
