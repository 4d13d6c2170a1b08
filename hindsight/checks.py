"""System checks: invalid configuration stops start-up with a message naming the variable.

One id per rule (``hindsight.config``: ``INVALID_VALUE``, ``MISSING_TOGETHER``,
``OUT_OF_ORDER``), so an operator can look an id up; the embedding-profile checks are
``hindsight.E100``/``E101`` (``hindsight.embeddings.checks``).
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.checks import Error, register

from hindsight.config import INVALID_VALUE, MISSING_TOGETHER, OUT_OF_ORDER

HINTS = {
    INVALID_VALUE: "Fix the value or unset the variable (README: Configuration).",
    MISSING_TOGETHER: "Set the variable, or change the setting that requires it.",
    OUT_OF_ORDER: (
        "Keep HINDSIGHT_API_REFLECT_WALL_TIMEOUT < WORKER_TASK_SOFT_TIME_LIMIT < "
        "WORKER_TASK_TIME_LIMIT < BROKER_VISIBILITY_TIMEOUT, and "
        "WORKER_HEARTBEAT_SECONDS < WORKER_LOCK_TTL_SECONDS."
    ),
}


@register()
def configuration_check(app_configs: Any = None, **kwargs: Any) -> list[Error]:
    return [
        Error(f"{problem.variable} {problem.message}", id=f"hindsight.{problem.rule}",
              hint=HINTS[problem.rule], obj=problem.variable)
        for problem in settings.HINDSIGHT.errors
    ]
