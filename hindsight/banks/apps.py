from __future__ import annotations

from django.apps import AppConfig


class BanksConfig(AppConfig):
    name = "hindsight.banks"
    label = "banks"
    verbose_name = "Banks and memories"

    def ready(self) -> None:
        from hindsight import checks  # noqa: F401  (registers the configuration checks)
        from hindsight.embeddings import checks as embedding_checks  # noqa: F401  (profile check)
