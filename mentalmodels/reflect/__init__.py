"""Reflect: the agent loop that answers a question from a bank's mental models and memories.

``reflect_run`` is the one entry point (the HTTP view and the mental-model refresh both call it);
``ReflectResult`` is what it returns and ``RetrievalError`` is how it says a lookup failed.
"""

from __future__ import annotations

from mentalmodels.reflect.agent import reflect_run
from mentalmodels.reflect.result import MemoryRef, ReflectResult, RetrievalError

__all__ = ["MemoryRef", "ReflectResult", "RetrievalError", "reflect_run"]
