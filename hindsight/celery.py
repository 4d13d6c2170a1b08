"""The Celery application; tasks live in each app's ``tasks`` module."""

from __future__ import annotations

import os
import warnings

from celery import Celery
from celery.exceptions import SecurityWarning

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "hindsight.settings")


def _quiet_root_warning_in_the_dev_stack() -> None:
    """``make run`` on a machine where the only user is root (a container, a CI box) starts its
    worker as root; Celery then warns on every start, and ``C_FORCE_ROOT`` does not stop it (that
    only lifts the refusal to run pickle as root — we accept JSON only). Dropping to another
    user (``--uid``) is no option there: the checkout and its virtualenv are often unreadable to
    anyone else. So in the dev stack alone (``HINDSIGHT_DEVSTACK=1``, set by ``make run`` for the
    processes it starts) that one warning is ignored; a deployment still sees it."""
    if os.environ.get("HINDSIGHT_DEVSTACK") == "1":
        warnings.filterwarnings(
            "ignore", message=r"You're running the worker with superuser privileges",
            category=SecurityWarning,
        )


_quiet_root_warning_in_the_dev_stack()

app = Celery("hindsight")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
