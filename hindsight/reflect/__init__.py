"""Reflect: the agent loop that answers a question from a bank's mental models and memories.

``reflect_run`` is the one entry point (the HTTP view and the mental-model refresh both call it);
``ReflectResult`` is what it returns and ``RetrievalError`` is how it says a lookup failed.
``reflect_run`` is imported on first use so that importing the result types never pulls in the
LLM gateway, the embedder or the mental-model app (which itself imports this package).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from hindsight.reflect.result import MemoryRef, ReflectResult, RetrievalError

if TYPE_CHECKING:
    from hindsight.reflect.agent import reflect_run

__all__ = ["MemoryRef", "ReflectResult", "RetrievalError", "reflect_run"]


def __getattr__(name: str) -> Any:
    if name == "reflect_run":
        from hindsight.reflect.agent import reflect_run

        return reflect_run
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
