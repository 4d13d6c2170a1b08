"""Reflect for a model that cannot call tools (docs/behaviour.md#a-model-without-tools).

The agent loop's first turns are forced searches — mental models, observations, raw facts — each
with the question. Without tools the same searches run here, up front, through the run's
``ToolBox`` (same scope, cutoff, window, budgets, and the same record of what was returned, so
grounding and a refresh's watermark work as always); the model then answers once, as structured
output shaped like the ``done`` tool's arguments, from their results given in the prompt.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from mentalmodels.reflect.tools import RECALL, SEARCH_MENTAL_MODELS, SEARCH_OBSERVATIONS, ToolBox

# The searches of the loop's forced turns, in their order.
SEARCHES = (SEARCH_MENTAL_MODELS, SEARCH_OBSERVATIONS, RECALL)
NAME = "reflect_answer"
# The ``done`` tool's arguments, every one required (a strict schema wants them all).
ANSWER_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "answer": {"type": "string"},
        "memory_ids": {"type": "array", "items": {"type": "string"}},
        "mental_model_ids": {"type": "array", "items": {"type": "string"}},
    },
    "required": ["answer", "memory_ids", "mental_model_ids"],
    "additionalProperties": False,
}

SYSTEM = """You answer questions from a memory bank. The bank has already been searched for the \
question; the results are below, under the name of each search.

Sources, in priority order:
1. Mental models (search_mental_models): curated summaries. If one covers the question and is \
not stale, answer from it. A stale model (`is_stale: true`) may miss recent information: check \
observations and raw facts before relying on it.
2. Observations (search_observations): knowledge consolidated from many facts.
3. Raw facts (recall): the ground truth, for details and for checking.

Rules:
- Answer only from the search results. If they hold nothing relevant, say so plainly.
- Write the answer in well-formatted markdown.
- Answer with one JSON object: `answer` (the answer), `memory_ids` (the ids of every fact and \
observation the answer relies on) and `mental_model_ids` (the ids of the mental models it relies \
on). Use ids exactly as the results give them; never invent one.
"""


def search_up_front(box: ToolBox, names: Sequence[str], query: str) -> list[tuple[str, Any]]:
    """Each search the run may use, once with the question: ``(name, ToolOutcome)`` in order."""
    return [(name, box.run(name, {"query": query}, allowed=names))
            for name in SEARCHES if name in names]


def answer_messages(*, system: str, question: str,
                    found: Sequence[tuple[str, dict[str, Any]]]) -> list[dict[str, Any]]:
    """The one request: the system prompt, then the question with every search's results."""
    results = "\n\n".join(
        f"Results of {name}:\n{json.dumps(payload, ensure_ascii=False, default=str)}"
        for name, payload in found) or "The searches returned nothing."
    return [{"role": "system", "content": system},
            {"role": "user", "content": f"{question}\n\n{results}"}]


def cited_ids(data: dict[str, Any], key: str) -> list[str]:
    value = data.get(key)
    return [v.strip() for v in value if isinstance(v, str) and v.strip()] \
        if isinstance(value, list) else []
