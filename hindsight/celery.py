"""The Celery application; tasks live in each app's ``tasks`` module."""

from __future__ import annotations

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "hindsight.settings")

app = Celery("hindsight")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()

# Import after the app exists: the step module needs nothing of Django.
from operations.workersteps import ReapDeadPoolProcesses  # noqa: E402

app.steps["worker"].add(ReapDeadPoolProcesses)
