"""gunicorn's configuration for the API (``gunicorn -c python:hindsight.project.gunicorn_conf``; ``make
run`` and the image start it so): each worker process's request threads share a small pool of
database connections (``HINDSIGHT_API_WEB_DB_POOL_SIZE``, 4) instead of connecting per request —
a PostgreSQL backend started and torn down for every API call cost more CPU than the request's
own SQL. Set once the application is loaded, before the first request (no connection is open
yet), in the worker process (gunicorn forks its workers; a pool must not cross a fork).

Only the hook lives here: bind address, workers and threads stay on the command line.
"""

from __future__ import annotations

import logging
from typing import Any


def post_worker_init(worker: Any) -> None:
    from django.conf import settings  # noqa: PLC0415 - the application is loaded by now

    from hindsight.infra.db import connections_pool_use  # noqa: PLC0415

    connections_pool_use(max_size=settings.HINDSIGHT.web_db_pool_size,
                         application_name="hindsight-api")
    logging.getLogger("hindsight").info("%s", settings.HINDSIGHT.llm_description)
