"""The LLM gateway (``get_llm()``): chat with tools and structured output through the openai SDK,
with deadlines, transient-error retries, usage and per-call records. See ``gateway``."""

from __future__ import annotations

from hindsight.infra.llm.gateway import (
    LLMGateway,
    collect_llm_calls,
    get_llm,
    slot_deadline,
)
from hindsight.infra.llm.types import (
    ChatResult,
    Deadline,
    LLMCallRecord,
    LLMCutOff,
    LLMError,
    LLMOutputError,
    LLMProviderError,
    LLMTimeout,
    LLMToolsUnsupported,
    StructuredResult,
    ToolCall,
    Usage,
)

__all__ = [
    "ChatResult",
    "Deadline",
    "LLMCallRecord",
    "LLMCutOff",
    "LLMError",
    "LLMGateway",
    "LLMOutputError",
    "LLMProviderError",
    "LLMTimeout",
    "LLMToolsUnsupported",
    "StructuredResult",
    "ToolCall",
    "Usage",
    "collect_llm_calls",
    "get_llm",
    "slot_deadline",
]
