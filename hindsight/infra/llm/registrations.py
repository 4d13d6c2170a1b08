"""The LLM request log attached to the gateway, once from ``LLMConfig.ready`` (the log writes
rows, so it can only be imported once the app registry is ready)."""

from __future__ import annotations

from hindsight.infra.llm.gateway import request_sink_register
from hindsight.infra.llm.log import llm_request_record


def connect() -> None:
    request_sink_register(llm_request_record)
