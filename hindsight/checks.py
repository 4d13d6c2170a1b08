"""System checks: invalid configuration stops start-up with a message naming the variable."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.checks import Error, register


@register()
def configuration_check(app_configs: Any = None, **kwargs: Any) -> list[Error]:
    return [
        Error(f"{name} {message}", id=f"hindsight.E{index:03d}", obj=name)
        for index, (name, message) in enumerate(settings.HINDSIGHT.errors, start=1)
    ]
