"""What a Celery process loads before its first task. celery-beat's settings
(``hindsight.project.settings_beat``): beat loads django-celery-beat alone — none of the service's apps,
handlers, LLM SDK or embedder runtime — and still has the project's broker, queue and scheduler.
(That a real beat with them publishes its schedule to a worker: tests/operations/test_workers.py
and tests/test_devstack_run.py.) A worker, on the project's settings, loads no URL and no view.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

# What beat does before its first tick, and a worker before its first task: Django set up,
# Celery's task discovery (where Celery's Django fixup would run every system check, whose URL
# check imports every view; hindsight.project.celery skips it).
_PROBE = """
import json, os, sys
import django
django.setup()
from hindsight.project.celery import app
app.loader.import_default_modules()
from django.conf import settings
print(json.dumps({
    "loaded": sorted(m for m in sys.argv[1:] if m in sys.modules),
    "apps": settings.INSTALLED_APPS,
    "scheduler": app.conf.beat_scheduler,
    "queue": app.conf.task_default_queue,
    "broker": app.conf.broker_url,
}))
"""

URL_MODULES = ("hindsight.project.urls", "hindsight.surfaces.mcp_server.http", "drf_spectacular.views")
# The modules the probe reports as loaded.
WATCHED = ("operations.engine", "hindsight.infra.llm.gateway", "openai", "onnxruntime", "numpy",
           "mentalmodels.models", "rest_framework", *URL_MODULES)


def _probe(settings_module: str) -> dict:
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": settings_module,
           "HINDSIGHT_API_TASK_QUEUE": "beat-probe-queue",
           "HINDSIGHT_API_REDIS_URL": "redis://127.0.0.1:1/0"}
    out = subprocess.run([sys.executable, "-c", _PROBE, *WATCHED], cwd=REPO, env=env, check=True,
                         capture_output=True, text=True, timeout=120)
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_beat_settings_load_none_of_the_service() -> None:
    beat = _probe("hindsight.project.settings_beat")
    assert beat["loaded"] == []
    assert beat["apps"] == ["django.contrib.contenttypes", "django_celery_beat"]
    assert beat["scheduler"] == "django_celery_beat.schedulers:DatabaseScheduler"
    assert beat["queue"] == "beat-probe-queue"
    assert beat["broker"] == "redis://127.0.0.1:1/0"
    # The project's settings load the service: what the narrowing saves. (Not the embedder's
    # runtime: only the local embedder's first use loads onnxruntime, tests/infra/test_lazy.py.)
    full = _probe("hindsight.project.settings")
    assert {"operations.engine", "hindsight.infra.llm.gateway", "mentalmodels.models",
            "numpy"} <= set(full["loaded"])


def test_a_worker_starting_up_loads_no_url_and_no_view() -> None:
    worker = _probe("hindsight.project.settings")
    assert not set(URL_MODULES) & set(worker["loaded"])
