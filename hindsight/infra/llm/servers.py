"""What each LLM server has shown it takes, remembered for the process's life.

Per server — its base URL and model together, since one server serves models that differ — the
gateway remembers the structured-output step that worked (``json_schema`` → ``json_object`` →
``prompt``) and whether the model refused tools, so later calls start where the server answers
instead of being refused again. The memory is this process's only: each process (API, worker)
learns on its own, with one refused request, and a restart forgets, so a server upgraded to take
more is used fully again after the next start.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

# The structured-output steps, from the server enforcing the schema to the prompt alone.
JSON_SCHEMA = "json_schema"
JSON_OBJECT = "json_object"
PROMPT = "prompt"
STEPS = (JSON_SCHEMA, JSON_OBJECT, PROMPT)


@dataclass
class ServerTraits:
    structured_step: str = JSON_SCHEMA
    # None until a model is seen answering with tools, or refusing them.
    tools: bool | None = None


_traits: dict[tuple[str, str], ServerTraits] = {}
_lock = threading.Lock()


def traits_of(base_url: str, model: str) -> ServerTraits:
    """A copy of what is known of ``model`` at ``base_url``."""
    with _lock:
        known = _traits.get((base_url, model))
        return ServerTraits() if known is None else ServerTraits(known.structured_step, known.tools)


def structured_step_remember(base_url: str, model: str, step: str) -> None:
    """The server refused the steps above ``step``: start there from now on (never back up)."""
    with _lock:
        traits = _traits.setdefault((base_url, model), ServerTraits())
        if STEPS.index(step) > STEPS.index(traits.structured_step):
            traits.structured_step = step


def tools_remember(base_url: str, model: str, *, supported: bool) -> None:
    with _lock:
        _traits.setdefault((base_url, model), ServerTraits()).tools = supported


def traits_forget() -> None:
    """Forget every server (tests pointing one scripted server at many behaviours)."""
    with _lock:
        _traits.clear()
