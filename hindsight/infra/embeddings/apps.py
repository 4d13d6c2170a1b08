from __future__ import annotations

from django.apps import AppConfig


class EmbeddingsConfig(AppConfig):
    name = "hindsight.infra.embeddings"
    label = "embeddings"
    verbose_name = "Embeddings"

    def ready(self) -> None:
        # Registration by import: the check module's decorators and signal hook run on import,
        # which must wait until the app registry is ready.
        from hindsight.infra.embeddings import checks  # noqa: F401, PLC0415
