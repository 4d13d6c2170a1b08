"""What each LLM server has shown it takes, remembered for the process's life.

Per server — its base URL and model together, since one server serves models that differ — the
gateway remembers the structured-output step that worked (``json_schema`` → ``json_object`` →
``prompt``), whether the model refused tools and whether it refused ``reasoning_effort``, so
later calls start where the server answers instead of being refused again. The memory is this
process's only: each process (API, worker) learns on its own, with one refused request, and a
restart forgets, so a server upgraded to take more is used fully again after the next start.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

# The structured-output steps, from the server enforcing the schema to the prompt alone.
JSON_SCHEMA = "json_schema"
JSON_OBJECT = "json_object"
PROMPT = "prompt"
STEPS = (JSON_SCHEMA, JSON_OBJECT, PROMPT)
# Providers whose ``json_object`` mode is not to be relied on (docs/providers.md): z.ai's deletes
# the token "json" from what the model writes (``latest.json`` comes back ``latest.``: valid
# JSON, silently wrong); the local servers and volcano do not hold the model to it. Below
# ``json_schema`` they go straight to the schema in the prompt.
JSON_OBJECT_UNRELIABLE = frozenset({"zai", "lmstudio", "ollama", "volcano"})


def steps_for(provider: str, json_object: bool | None) -> tuple[str, ...]:
    """The structured-output steps to walk for ``provider``: ``json_object`` is the operator's
    choice (``HINDSIGHT_API_LLM_OPENAI_COMPATIBLE_JSON_MODE``) when made, else the provider's."""
    if json_object is None:
        json_object = provider not in JSON_OBJECT_UNRELIABLE
    return STEPS if json_object else (JSON_SCHEMA, PROMPT)


@dataclass
class ServerTraits:
    structured_step: str = JSON_SCHEMA
    # None until a model is seen answering with tools, or refusing them.
    tools: bool | None = None
    # False once the server refused ``reasoning_effort`` (a model that does not reason).
    reasoning_effort: bool = True


_traits: dict[tuple[str, str], ServerTraits] = {}
_lock = threading.Lock()


def traits_of(base_url: str, model: str) -> ServerTraits:
    """A copy of what is known of ``model`` at ``base_url``."""
    with _lock:
        known = _traits.get((base_url, model))
        return ServerTraits() if known is None else ServerTraits(
            known.structured_step, known.tools, known.reasoning_effort)


def structured_step_remember(base_url: str, model: str, step: str) -> None:
    """The server refused the steps above ``step``: start there from now on (never back up)."""
    with _lock:
        traits = _traits.setdefault((base_url, model), ServerTraits())
        if STEPS.index(step) > STEPS.index(traits.structured_step):
            traits.structured_step = step


def reasoning_effort_refused(base_url: str, model: str) -> None:
    with _lock:
        _traits.setdefault((base_url, model), ServerTraits()).reasoning_effort = False


def tools_remember(base_url: str, model: str, *, supported: bool) -> None:
    with _lock:
        _traits.setdefault((base_url, model), ServerTraits()).tools = supported


def traits_forget() -> None:
    """Forget every server (tests pointing one scripted server at many behaviours)."""
    with _lock:
        _traits.clear()
