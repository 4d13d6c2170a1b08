from __future__ import annotations

from django.apps import AppConfig


class LLMConfig(AppConfig):
    """The LLM gateway as an app: it owns the LLM request log (``hindsight.infra.llm.models``)."""

    name = "hindsight.infra.llm"
    label = "llm"
    verbose_name = "LLM requests"

    def ready(self) -> None:
        # The log writes rows, so its sink can only be attached once the app registry is ready.
        from hindsight.infra.llm.registrations import connect  # noqa: PLC0415

        connect()
