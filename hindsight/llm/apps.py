from __future__ import annotations

from django.apps import AppConfig


class LLMConfig(AppConfig):
    """The LLM gateway as an app: it owns the LLM request log (``hindsight.llm.models``)."""

    name = "hindsight.llm"
    label = "llm"
    verbose_name = "LLM requests"

    def ready(self) -> None:
        # The log writes rows, so its sink can only be attached once the app registry is ready.
        from hindsight.llm.gateway import request_sink_register  # noqa: PLC0415
        from hindsight.llm.log import llm_request_record  # noqa: PLC0415

        request_sink_register(llm_request_record)
