"""The reflect agent loop: forced first turns, then ``auto``, then a tool-less synthesis.

One run answers one question from one bank. The sources come in the priority order of seed 000:
the first turns are forced (``tool_choice`` naming the tool) to search mental models (when any is
visible and they are not excluded), then observations (when the fact types allow them), then
raw facts. If every mental model the search found is fresh and non-empty, the remaining forced
turns are released: the model may answer from them at once. A stale one is shown with its
staleness and the forced turns go on. After the forced turns the model chooses (``auto``) until
it calls ``done``; the budget caps the iterations (low/mid/high = 5/10/20) and the last one is a
synthesis call without tools. A model that cannot call tools (the gateway's
``tools_supported``, or its refusal on the first turn) gets the same searches run up front and
answers once from their results (``toolless``; docs/behaviour.md#a-model-without-tools).

``based_on`` is built from what the answer cites *and* a tool returned in this run; invented or
unseen ids are dropped with a warning. Every memory a tool returned is reported in
``memories_read`` whether cited or not: a refresh computes its watermark from it. A lookup that
raises surfaces as ``RetrievalError``; LLM errors propagate untouched. No database transaction
is held while the LLM or the embedder works.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterable
from datetime import datetime
from typing import Any

from django.db import DatabaseError

from hindsight.infra.llm import Deadline, LLMError, LLMToolsUnsupported, get_llm
from hindsight.infra.tagscope import TagScope
from hindsight.infra.vocabulary import FactType, iso
from mentalmodels.directives.selectors import directives_applicable
from mentalmodels.reflect import prompts, toolless
from mentalmodels.reflect.mm_search import visible_models
from mentalmodels.reflect.result import ReflectResult, RetrievalError, empty_based_on
from mentalmodels.reflect.tools import (
    DONE,
    RECALL,
    SEARCH_MENTAL_MODELS,
    SEARCH_OBSERVATIONS,
    ToolBox,
)

ITERATIONS = {"low": 5, "mid": 10, "high": 20}
_SOURCES_LINE = re.compile(r"^\s*\**\s*sources?\s*\**\s*:(.*)$", re.IGNORECASE)
_ID_TOKEN = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]*")
_UUID = re.compile(
    r"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b"
)


def _forced_choice(name: str) -> dict[str, Any]:
    return {"type": "function", "function": {"name": name}}


def _add_usage(total: dict[str, int], usage: Any) -> dict[str, int]:
    counts = {
        "input_tokens": int(getattr(usage, "input_tokens", 0) or 0),
        "output_tokens": int(getattr(usage, "output_tokens", 0) or 0),
        "total_tokens": int(getattr(usage, "total_tokens", 0) or 0),
    }
    for key, value in counts.items():
        total[key] += value
    return counts


def _str_ids(value: Any) -> list[str]:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list):
        return []
    return [v.strip() for v in value if isinstance(v, str) and v.strip()]


def _split_sources(text: str) -> tuple[str, list[str]]:
    """A text answer's citations: a trailing ``Sources: a, b`` line (removed) and inline uuids.

    Mental-model ids are only taken from the Sources line (they look like ordinary words);
    memory ids are uuids, safe to pick up anywhere in the text.
    """
    lines = text.rstrip().splitlines()
    answer, tokens = text.strip(), []
    for index in range(len(lines) - 1, max(-1, len(lines) - 4), -1):
        match = _SOURCES_LINE.match(lines[index])
        if match:
            answer = "\n".join(lines[:index] + lines[index + 1 :]).strip()
            tokens = _ID_TOKEN.findall(match.group(1))
            break
    return answer, tokens + _UUID.findall(answer)


class _Run:
    """The state of one reflect run; ``reflect_run`` is its only entry point."""

    def __init__(self, *, query: str, budget: str, max_tokens: int | None, box: ToolBox,
                 deadline: Deadline | None, response_schema: dict[str, Any] | None,
                 apply_all_directives: bool):
        self.query = query
        self.max_iterations = ITERATIONS[budget]
        self.max_tokens = max_tokens
        self.box = box
        self.deadline = deadline
        self.response_schema = response_schema
        self.apply_all_directives = apply_all_directives
        self.llm = get_llm(bank_id=box.bank_id)  # LLMNotConfigured before anything is read
        self.result = ReflectResult(text="")
        self.messages: list[dict[str, Any]] = []

    # --- LLM calls --------------------------------------------------------------------------

    def _chat(self, scope: str, **kwargs: Any) -> Any:
        chat = self.llm.chat(
            self.messages, max_tokens=self.max_tokens, deadline=self.deadline,
            purpose=f"reflect:{scope}", **kwargs,
        )
        counts = _add_usage(self.result.usage, chat.usage)
        self.result.llm_calls.append(
            {"scope": scope, "duration_ms": int(chat.duration_ms or 0), **counts}
        )
        return chat

    # --- the loop ---------------------------------------------------------------------------

    def execute(self) -> ReflectResult:
        started = time.monotonic()
        try:
            return self._loop(started)
        except Exception as exc:
            # A failed run still has a story (the calls made so far): a refresh records it in
            # its trace (docs/behaviour.md#the-trace). The exception itself propagates unchanged.
            self.result.warnings[:0] = self.box.warnings
            self.result.memories_read = self.box.memories_read()
            self.result.duration_ms = int((time.monotonic() - started) * 1000)
            exc.reflect_partial = self.result  # type: ignore[attr-defined]
            raise

    def _loop(self, started: float) -> ReflectResult:
        box = self.box
        try:
            models_visible = box.include_mental_models and visible_models(
                bank_id=box.bank_id, scope=box.scope, exclude_ids=box.exclude_mental_model_ids
            ).exists()
        except DatabaseError as exc:
            raise RetrievalError(f"mental-model lookup failed: {exc}") from exc
        try:
            # docs/behaviour.md#directives: the request's scope picks them, as it picks memories.
            self.result.directives = [
                {"id": str(d.id), "name": d.name, "content": d.content}
                for d in directives_applicable(bank_id=box.bank_id, scope=box.scope,
                                               apply_all=self.apply_all_directives)
            ]
        except DatabaseError as exc:
            raise RetrievalError(f"directive lookup failed: {exc}") from exc
        names = box.names(models_visible=bool(models_visible))
        tools = box.definitions(names)
        forced = [n for n in (SEARCH_MENTAL_MODELS, SEARCH_OBSERVATIONS, RECALL) if n in names]
        self.messages = [
            {"role": "system",
             "content": prompts.with_directives(prompts.SYSTEM, self.result.directives)},
            {"role": "user", "content": prompts.question(self.query, max_tokens=self.max_tokens)},
        ]
        # docs/behaviour.md#a-model-without-tools: the same searches, up front, one answer.
        answer: str | None
        if not self.llm.tools_supported:
            answer, cited_memories, cited_models = self._answer_without_tools(names)
        else:
            try:
                answer, cited_memories, cited_models = self._agent_turns(names, tools, forced)
            except LLMToolsUnsupported:
                answer, cited_memories, cited_models = self._answer_without_tools(names)
        self._finish(answer or "", cited_memories, cited_models)
        self.result.warnings[:0] = box.warnings
        self.result.duration_ms = int((time.monotonic() - started) * 1000)
        return self.result

    def _answer_without_tools(self, names: list[str]) -> tuple[str, list[str], list[str]]:
        found = []
        for name, outcome in toolless.search_up_front(self.box, names, self.query):
            self.result.tool_calls.append(
                {"name": name, "input": {"query": self.query},
                 "result_count": outcome.result_count, "duration_ms": outcome.duration_ms,
                 "iteration": 1})
            self.result.tool_outputs.append(outcome.payload)
            found.append((name, outcome.payload))
        system = prompts.with_directives(toolless.SYSTEM, self.result.directives)
        question = prompts.question(self.query, max_tokens=self.max_tokens)
        answered = self.llm.structured(
            toolless.answer_messages(system=system, question=question, found=found),
            schema=toolless.ANSWER_SCHEMA, name=toolless.NAME, max_tokens=self.max_tokens,
            deadline=self.deadline, purpose="reflect:without_tools",
        )
        counts = _add_usage(self.result.usage, answered.usage)
        self.result.llm_calls.append(
            {"scope": "without_tools", "duration_ms": int(answered.duration_ms or 0), **counts})
        self.result.iterations = 1
        self.result.finish = "without_tools"
        data = answered.data
        return (str(data.get("answer") or "").strip(), toolless.cited_ids(data, "memory_ids"),
                toolless.cited_ids(data, "mental_model_ids"))

    def _agent_turns(
        self, names: list[str], tools: list[dict[str, Any]], forced: list[str]
    ) -> tuple[str | None, list[str], list[str]]:
        box = self.box
        answer: str | None = None
        cited_memories: list[str] = []
        cited_models: list[str] = []
        for iteration in range(1, self.max_iterations + 1):
            self.result.iterations = iteration
            if iteration == self.max_iterations:
                self.messages.append({"role": "user", "content": prompts.SYNTHESIS})
                chat = self._chat("final")
                answer, tokens = _split_sources(chat.content or "")
                cited_memories, cited_models = tokens, tokens
                self.result.finish = "synthesis"
                self.result.warnings.append(
                    f"iteration cap ({self.max_iterations}) reached: the answer was synthesised "
                    "without tools"
                )
                break

            choice: Any = _forced_choice(forced[0]) if forced else "auto"
            chat = self._chat(f"agent_{iteration}", tools=tools, tool_choice=choice)
            was_forced = bool(forced)
            if not chat.tool_calls:
                text = (chat.content or "").strip()
                if text:
                    answer, tokens = _split_sources(text)
                    cited_memories, cited_models = tokens, tokens
                    self.result.finish = "text"
                    break
                # Neither a tool nor an answer: say what is expected and spend another turn.
                self.messages.append(chat.message)
                self.messages.append(
                    {"role": "user", "content": "Call a tool, or call `done` with your answer."}
                )
                if was_forced:
                    forced.pop(0)
                continue

            self.messages.append(chat.message)
            done_call = next((c for c in chat.tool_calls if c.name == DONE), None)
            if done_call is not None:
                done_answer = done_call.arguments.get("answer")
                if isinstance(done_answer, str) and done_answer.strip():
                    answer = done_answer.strip()
                    cited_memories = _str_ids(done_call.arguments.get("memory_ids")) + _str_ids(
                        done_call.arguments.get("observation_ids")
                    )
                    cited_models = _str_ids(done_call.arguments.get("mental_model_ids"))
                    self.result.finish = "done"
                    break

            release = False
            for call in chat.tool_calls:
                if call.name == DONE:
                    payload: dict[str, Any] = {
                        "error": "`done` needs a non-empty `answer` string"
                    }
                    self.messages.append(self._tool_message(call.id, payload))
                    continue
                if call.arguments_error:
                    # Malformed arguments: tell the model instead of guessing what it meant.
                    payload = {"error": f"arguments must be a JSON object: {call.arguments_error}"}
                    self.messages.append(self._tool_message(call.id, payload))
                    continue
                outcome = box.run(call.name, call.arguments, allowed=names)
                self.result.tool_calls.append(
                    {
                        "name": call.name,
                        "input": dict(call.arguments),
                        "result_count": outcome.result_count,
                        "duration_ms": outcome.duration_ms,
                        "iteration": iteration,
                    }
                )
                self.result.tool_outputs.append(outcome.payload)
                self.messages.append(self._tool_message(call.id, outcome.payload))
                if call.name == SEARCH_MENTAL_MODELS:
                    entries = outcome.payload.get("mental_models") or []
                    # Fresh, non-empty models answer the question: the lower sources are optional.
                    release = bool(entries) and all(
                        not e["is_stale"] and not e["is_empty"] for e in entries
                    )
            if was_forced:
                forced.pop(0)
            if release and forced:
                forced.clear()
        return answer, cited_memories, cited_models

    @staticmethod
    def _tool_message(call_id: str, payload: dict[str, Any]) -> dict[str, Any]:
        return {
            "role": "tool",
            "tool_call_id": call_id,
            "content": json.dumps(payload, ensure_ascii=False, default=str),
        }

    # --- grounding and structured output ------------------------------------------------------

    def _finish(self, answer: str, memory_ids: Iterable[str], model_ids: Iterable[str]) -> None:
        box = self.box
        result = self.result
        result.text = answer
        result.memories_read = box.memories_read()
        by_lower = {key.lower(): key for key in box.memories}
        based_on = empty_based_on()
        seen: set[str] = set()
        unknown: list[str] = []
        # The model may file an id under the wrong list: resolve each against both kinds.
        for raw in [*memory_ids, *model_ids]:
            key = by_lower.get(raw.lower())
            if key is not None:
                if key in seen:
                    continue
                seen.add(key)
                hit = box.memories[key]
                bucket = hit.fact_type if hit.fact_type in based_on else FactType.WORLD
                entry: dict[str, Any] = {
                    "id": key,
                    "text": hit.text,
                    "type": hit.fact_type,
                    "context": hit.context or None,
                    "tags": list(hit.tags or []),
                }
                for attr in ("occurred_start", "occurred_end", "mentioned_at", "updated_at"):
                    value: datetime | None = getattr(hit, attr, None)
                    entry[attr] = iso(value)
                entry["document_id"] = getattr(hit, "document_id", None)
                based_on[bucket].append(entry)
                result.cited_memory_ids.add(key)
            elif raw in box.mental_models:
                if raw in seen:
                    continue
                seen.add(raw)
                model = box.mental_models[raw]
                based_on["mental-models"].append(
                    {"id": raw, "name": model["name"], "text": model["text"],
                     "tags": model["tags"], "is_stale": model["is_stale"]}
                )
                result.mental_models_used.append(dict(model))
            elif result.finish in ("done", "without_tools"):
                unknown.append(raw)
        # Applied, not cited: every directive the prompt carried (as upstream reports them).
        based_on["directives"] = [dict(d) for d in result.directives]
        if unknown:
            result.warnings.append(
                "ignored cited ids no tool returned in this run: " + ", ".join(sorted(set(unknown)))
            )
        result.based_on = based_on

        if self.response_schema is not None and answer:
            try:
                started = time.monotonic()
                structured = self.llm.structured(
                    prompts.structured_messages(
                        query=self.query, answer=answer, schema=self.response_schema
                    ),
                    schema=self.response_schema,
                    name="reflect_output",
                    deadline=self.deadline,
                    purpose="reflect:structured",
                )
                counts = _add_usage(result.usage, structured.usage)
                result.llm_calls.append(
                    {
                        "scope": "structured",
                        "duration_ms": int(
                            structured.duration_ms or (time.monotonic() - started) * 1000
                        ),
                        **counts,
                    }
                )
                result.structured_output = structured.data
            except LLMError as exc:
                result.structured_output_error = f"{type(exc).__name__}: {exc}"
                result.warnings.append(f"structured output failed: {exc}")


def reflect_run(
    *,
    bank_id: str,
    query: str,
    budget: str | None = "mid",
    max_tokens: int | None = None,
    scope: TagScope,
    cutoff: datetime | None = None,
    updated_after: datetime | None = None,
    exclude_mental_model_ids: Iterable[str] = (),
    include_mental_models: bool = True,
    include_observations: bool = True,
    response_schema: dict[str, Any] | None = None,
    deadline: Deadline | None = None,
    observations_max_tokens: int | None = None,
    apply_all_directives: bool = False,
) -> ReflectResult:
    """Answer ``query`` from bank ``bank_id`` with the agent loop (see the module docstring).

    ``scope`` (a ``TagScope``) narrows every memory tool and the mental models' visibility;
    ``cutoff`` bounds every memory tool to ``updated_at <= cutoff`` (a refresh's snapshot),
    ``updated_after`` to ``updated_at > updated_after`` (a delta refresh's window).
    The active directives ``scope`` applies (every active one with ``apply_all_directives``)
    go into the system prompt, highest priority first (docs/behaviour.md#directives).
    Raises ``LLMNotConfigured`` before reading anything when no LLM is configured,
    ``RetrievalError`` when a lookup raises, and the gateway's ``LLMError`` subclasses as they
    come.
    """
    budget = budget or "mid"
    if budget not in ITERATIONS:
        raise ValueError(f"budget must be one of low, mid, high; got {budget!r}")
    box = ToolBox(
        bank_id=bank_id,
        query=query,
        scope=scope,
        cutoff=cutoff,
        updated_after=updated_after,
        exclude_mental_model_ids=tuple(exclude_mental_model_ids or ()),
        include_mental_models=include_mental_models,
        include_observations=include_observations,
        observations_max_tokens=observations_max_tokens,
    )
    run = _Run(query=query, budget=budget, max_tokens=max_tokens, box=box, deadline=deadline,
               response_schema=response_schema, apply_all_directives=apply_all_directives)
    return run.execute()
