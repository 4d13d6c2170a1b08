from __future__ import annotations

from django.apps import AppConfig


class HindsightConfig(AppConfig):
    """The project itself as an app: it owns the configuration checks (no models)."""

    name = "hindsight.project"
    label = "hindsight"
    verbose_name = "Hindsight"

    def ready(self) -> None:
        # Registration by import: the checks' decorators run on import, after the registry is ready.
        from hindsight.infra import checks  # noqa: F401, PLC0415
