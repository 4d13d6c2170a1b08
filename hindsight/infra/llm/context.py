"""Who is calling the LLM: the bank, the operation and its type, set by the caller for a block.

A handler (or a view) wraps its work in ``llm_context(bank_id=…, operation=…, operation_id=…)``;
every request the gateway sends inside the block is logged with those values
(``hindsight.infra.llm.log``) and counted in the block's ``LLMTally``, which the caller stores in the
operation's ``result_metadata``. Blocks nest: the innermost names the request, every enclosing
tally counts it. A context variable, so it follows the thread (and asyncio task) that set it.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any


@dataclass
class LLMTally:
    """Requests sent inside one ``llm_context`` block and the tokens they cost."""

    requests: int = 0
    errors: int = 0
    input_tokens: int = 0
    output_tokens: int = 0

    def add(self, *, input_tokens: int, output_tokens: int, error: bool) -> None:
        self.requests += 1
        self.errors += int(error)
        self.input_tokens += input_tokens
        self.output_tokens += output_tokens

    def as_dict(self) -> dict[str, Any]:
        return {
            "requests": self.requests,
            "errors": self.errors,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "total_tokens": self.input_tokens + self.output_tokens,
        }


@dataclass(frozen=True)
class LLMContext:
    bank_id: str | None
    operation: str | None
    operation_id: str | None
    tally: LLMTally = field(default_factory=LLMTally, compare=False)


_stack: contextvars.ContextVar[tuple[LLMContext, ...]] = contextvars.ContextVar(
    "hindsight_llm_context", default=()
)


@contextlib.contextmanager
def llm_context(
    *, bank_id: str | None, operation: str | None, operation_id: str | None = None
) -> Iterator[LLMTally]:
    context = LLMContext(bank_id=bank_id, operation=operation, operation_id=operation_id)
    token = _stack.set(_stack.get() + (context,))
    try:
        yield context.tally
    finally:
        _stack.reset(token)


def current_llm_context() -> LLMContext | None:
    stack = _stack.get()
    return stack[-1] if stack else None


def count_in_tallies(*, input_tokens: int, output_tokens: int, error: bool) -> None:
    for context in _stack.get():
        context.tally.add(input_tokens=input_tokens, output_tokens=output_tokens, error=error)
