"""Modules imported on first use: for an import that costs every process's start more than it
gives a process that never uses it.

The openai SDK is the one such import: about 0.4 s of CPU and 28 MB to import, at every Django
start (``manage.py`` commands, each gunicorn and Celery process), though only a process that
calls an LLM or the OpenAI-compatible embedder needs it. Its users import ``openai`` from
here (``from hindsight.infra.lazy import openai``); the first attribute read imports the SDK.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any


class LazyModule:
    """Stands for the module ``name``; the first attribute read imports it (under the import
    system's own lock, so any thread may be first) and every read is the module's own.
    Type checkers see the real module (``openai`` below)."""

    def __init__(self, name: str) -> None:
        self._name = name

    def __getattr__(self, attribute: str) -> Any:
        return getattr(importlib.import_module(self._name), attribute)

    def __repr__(self) -> str:
        return f"<LazyModule {self._name!r}>"


if TYPE_CHECKING:
    import openai as openai  # noqa: PLC0414 - re-exported: type checkers see the real SDK
else:
    openai = LazyModule("openai")
