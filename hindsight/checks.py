"""System checks: invalid configuration stops start-up with a message naming the variable."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.checks import Error, register

SECRET_KEY_CHECK_ID = "hindsight.E200"


@register()
def configuration_check(app_configs: Any = None, **kwargs: Any) -> list[Error]:
    return [
        Error(f"{name} {message}", id=f"hindsight.E{index:03d}", obj=name)
        for index, (name, message) in enumerate(settings.HINDSIGHT.errors, start=1)
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
