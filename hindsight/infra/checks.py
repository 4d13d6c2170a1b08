"""System checks: invalid configuration stops start-up with a message naming the variable.

One id per rule (``hindsight.infra.config``: ``INVALID_VALUE``, ``MISSING_TOGETHER``,
``OUT_OF_ORDER``), so an operator can look an id up; the embedding-profile checks are
``hindsight.E100``/``E101`` (``hindsight.infra.embeddings.checks``); a missing secret key is
``hindsight.E200``.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.checks import Error, register

from hindsight.infra.config import INVALID_VALUE, MISSING_TOGETHER, OUT_OF_ORDER

HINTS = {
    INVALID_VALUE: "Fix the value or unset the variable (README: Configuration).",
    MISSING_TOGETHER: "Set the variable, or change the setting that requires it.",
    OUT_OF_ORDER: (
        "Keep HINDSIGHT_API_REFLECT_WALL_TIMEOUT < WORKER_TASK_SOFT_TIME_LIMIT < "
        "WORKER_TASK_TIME_LIMIT < BROKER_VISIBILITY_TIMEOUT, and "
        "WORKER_HEARTBEAT_SECONDS < WORKER_LOCK_TTL_SECONDS."
    ),
}

SECRET_KEY_CHECK_ID = "hindsight.E200"


@register()
def configuration_check(app_configs: Any = None, **kwargs: Any) -> list[Error]:
    return [
        Error(f"{problem.variable} {problem.message}", id=f"hindsight.{problem.rule}",
              hint=HINTS[problem.rule], obj=problem.variable)
        for problem in settings.HINDSIGHT.errors
    ]


@register()
def secret_key_check(app_configs: Any = None, **kwargs: Any) -> list[Error]:
    """Every process must sign with one key: a random key per process (the fallback in
    settings) logs admin users out whenever another gunicorn worker answers. ``make run`` and
    ``manage.py`` next to it use the key kept under ``.devdata/``; anything else must set one."""
    if settings.HINDSIGHT.secret_key:
        return []
    return [
        Error(
            "HINDSIGHT_API_SECRET_KEY is not set",
            hint=(
                "Set HINDSIGHT_API_SECRET_KEY to one long random string shared by every API "
                "process, e.g. the output of `python -c 'import secrets; "
                "print(secrets.token_urlsafe(50))'`. `make run` keeps one under .devdata/ by "
                "itself, and manage.py uses it when it finds that `make run`."
            ),
            id=SECRET_KEY_CHECK_ID,
            obj="HINDSIGHT_API_SECRET_KEY",
        )
    ]
