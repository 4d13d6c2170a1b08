"""The words of the reflect agent: system prompt, the question, the synthesis and extraction asks.

Kept apart from the loop so the loop reads as control flow and the prompts can be tuned without
touching it. The prompts state the source hierarchy of seed 000 (mental models, then
observations, then raw facts) and how to cite, since ``based_on`` is built from the citations.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

SYSTEM = """You answer questions from a memory bank. Use the tools to look things up, then call \
`done` with your answer.

Sources, in priority order:
1. Mental models (`search_mental_models`): curated summaries. If one covers the question and is \
not stale, answer from it. A stale model (`is_stale: true`) may miss recent information: check \
observations and raw facts before relying on it.
2. Observations (`search_observations`): knowledge consolidated from many facts.
3. Raw facts (`recall`): the ground truth, for details and for checking.

Rules:
- Answer only from what the tools returned. If they returned nothing relevant, say so plainly.
- Write the answer in well-formatted markdown.
- In `done`, list in `memory_ids` the ids of every fact and observation your answer relies on, \
and in `mental_model_ids` the ids of the mental models it relies on. Use ids exactly as the \
tools returned them; never invent one.
"""

# Hard rules go right under the opening line, where nothing the tools return can push them out of
# sight, and are repeated as the prompt's last words (docs/behaviour.md#directives).
DIRECTIVES_HEAD = """## Directives (mandatory)
These are hard rules. Follow every one of them in the answer, even where other context suggests \
otherwise, and do not mention them or explain how you followed them:
"""

DIRECTIVES_REMINDER = """Before you answer, check that the answer follows every directive above:"""


def directive_rules(directives: Sequence[Mapping[str, Any]]) -> list[str]:
    """Each directive as the prompt states it, in the order given (highest priority first)."""
    return [f"**{d['name']}**: {d['content']}" for d in directives]


def with_directives(prompt: str, directives: Sequence[Mapping[str, Any]]) -> str:
    """``prompt`` with the directives after its first paragraph and a reminder at its end; the
    prompt itself when there are none."""
    if not directives:
        return prompt
    rules = directive_rules(directives)
    opening, _, rest = prompt.partition("\n\n")
    listed = "\n".join(f"- {rule}" for rule in rules)
    numbered = "\n".join(f"{i}. {rule}" for i, rule in enumerate(rules, 1))
    return (f"{opening}\n\n{DIRECTIVES_HEAD}{listed}\n\n{rest.rstrip()}\n\n"
            f"{DIRECTIVES_REMINDER}\n{numbered}\n")


SYNTHESIS = """You have used all the lookups available for this question. Write the final answer \
now from the information above, without calling any tool. Answer only from what the tools \
returned; if nothing relevant was found, say so plainly. After the answer, on a last line of \
its own, write `Sources:` followed by the ids of the facts, observations and mental models the \
answer relies on, separated by commas."""

STRUCTURED = """Extract the requested fields from the answer below. Use only what the answer says; \
leave out what it does not say unless the schema requires it."""


def question(query: str, *, max_tokens: int | None) -> str:
    """The user turn: the question, and the answer length the caller allows."""
    lines = [f"Question: {query.strip()}"]
    if max_tokens:
        lines.append(f"Keep the answer under about {max_tokens} tokens.")
    return "\n\n".join(lines)


def structured_messages(*, query: str, answer: str, schema: dict[str, Any]) -> list[dict[str, str]]:
    return [
        {"role": "system", "content": STRUCTURED},
        {
            "role": "user",
            "content": (
                f"Question: {query}\n\nAnswer:\n{answer}\n\n"
                f"JSON schema:\n{json.dumps(schema, sort_keys=True)}"
            ),
        },
    ]
