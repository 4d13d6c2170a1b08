"""The delta refresh (DL-*): the reflect loop's answer, read over the window only
(``mentalmodels.refresh.answer``), turned into edits of the current document.

A second LLM call is shown the topic, the current document with its ids
(``mentalmodels.document.structure``) and the facts the answer cited — the facts themselves with their
dates, oldest first, never the loop's synthesis — and answers with operations
(``mentalmodels.document.edits`` applies them). Every operation dropped, or an answer that cannot be
read: asked once more with the wrong ids and the ids the document has
(docs/behaviour.md#dropped-edits-and-the-second-ask). What cannot be
applied fails the attempt (retryable; content, document and window untouched). ``based_on``
accumulates across delta refreshes (docs/behaviour.md#cumulative-grounding).

The facts the page cites that were removed or edited since its watermark are shown too, as
retracted (``mentalmodels.refresh.retraction``); an answer that removes or rewrites nothing for
them raises ``RetractionIgnored`` and the page is rewritten in full instead
(docs/behaviour.md#retracted-facts).
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

from hindsight.infra.llm import Deadline, LLMOutputError, get_llm
from hindsight.infra.vocabulary import (
    BASED_ON_FACT_TYPES,
    BASED_ON_KEYS,
    RefreshFailureReason,
    RefreshOutcome,
)
from mentalmodels.document.edits import ANSWER_SCHEMA, DeltaResult, apply_operations
from mentalmodels.document.structure import Document, document_for, render
from mentalmodels.reflect.prompts import with_directives
from mentalmodels.refresh.answer import normalise_based_on
from mentalmodels.refresh.attempt import RefreshAttempt
from mentalmodels.refresh.errors import RefreshFailed
from mentalmodels.refresh.failures import (
    DELTA_OPERATIONS,
    DELTA_UNTOUCHED,
    LLM_FAILURES,
    llm_failure,
    refused,
)
from mentalmodels.refresh.records import Outcome, Plan
from mentalmodels.refresh.retraction import Retraction, acted_on, prune_based_on, retraction_prompt

DELTA_SYSTEM = """You maintain a long-lived markdown document by editing it, never by rewriting \
it. You are given the document's topic, the document as sections of blocks (each with its id), \
and new facts. Answer with the edit operations that bring the document up to date with the new \
facts, as {"operations": [...]}.

Operations (ids are the ones shown; never invent or reuse an id for another kind of thing):
- {"op": "append_block", "section_id": S, "markdown": M} — add a block at the end of section S
- {"op": "insert_block", "section_id": S, "after_block_id": B or null, "markdown": M}
- {"op": "replace_block", "section_id": S, "block_id": B, "markdown": M} — B must be in S
- {"op": "remove_block", "section_id": S, "block_id": B}
- {"op": "replace_section_blocks", "section_id": S, "blocks": [M, ...]}
- {"op": "add_section", "heading": H, "level": 1-6, "after_section_id": S or null, "blocks": [M]}
- {"op": "rename_section", "section_id": S, "heading": H}
- {"op": "remove_section", "section_id": S}

Rules:
- section_id is always a section's id (like "team"); block_id always a block's id (like \
"b-1a2b3c4d"). A block id is never a section id.
- A block's markdown is one paragraph, list, table or code fence, without headings. Edit the \
smallest block that changes; leave everything else alone. Do not restate what the document \
already says.
- The facts are listed oldest first. When facts disagree, the later one is the current state: \
never replace what the document says with an older fact than the one it rests on.
- If the new facts change nothing, answer {"operations": []}."""


def _fact_time(entry: dict[str, Any]) -> tuple[str, str]:
    """Event time (when it happened, else when it was said), then write time: the order in
    which the ops call must read facts so a later state comes last."""
    written = str(entry.get("updated_at") or "")
    event = str(entry.get("occurred_start") or entry.get("mentioned_at") or written)
    return event, written


def _window_facts(based_on: dict[str, list[dict[str, Any]]]) -> list[dict[str, Any]]:
    facts = [e for key in BASED_ON_FACT_TYPES
             for e in based_on.get(key) or []]
    return sorted(facts, key=_fact_time)


def _facts_text(facts: list[dict[str, Any]]) -> str:
    lines = []
    for index, fact in enumerate(facts, 1):
        event, written = _fact_time(fact)
        dates = f"happened {event}" + (f", recorded {written}" if written and written != event else "")
        context = f" (context: {fact['context']})" if fact.get("context") else ""
        lines.append(f"{index}. [{dates}] {fact.get('text', '')}{context}")
    return "\n".join(lines)


class RetractionIgnored(Exception):
    """The edit answer removed or rewrote nothing while facts were retracted, or would leave
    the document empty (docs/behaviour.md#retracted-facts)."""


def _delta_messages(plan: Plan, doc: Document, facts: list[dict[str, Any]],
                    directives: list[dict[str, Any]],
                    retraction: Retraction | None) -> list[dict[str, Any]]:
    outline = json.dumps(doc.outline(), ensure_ascii=False, indent=1)
    previous = _window_facts(_still_cited(plan, retraction))
    as_of = ""
    if previous:
        # Facts can arrive out of date order (a backfill): say how recent the document already
        # is, so an older fact is not taken for news about the same thing (#4427).
        as_of = (f"The document already reflects facts up to {_fact_time(previous[-1])[0]}; a new "
                 "fact that happened before that is history, not the current state.\n\n")
    retracted = f"{retraction_prompt(retraction)}\n\n" if retraction else ""
    return [
        # The edits follow the directives the reflect loop did (docs/behaviour.md#directives).
        {"role": "system", "content": with_directives(DELTA_SYSTEM, directives)},
        {"role": "user", "content": (
            f"Topic: {plan.model.source_query.strip()}\n\n"
            f"Current document (sections and blocks with their ids):\n{outline}\n\n"
            f"{retracted}{as_of}New facts, oldest first:\n{_facts_text(facts) or '(none)'}"
        )},
    ]


def _ids_hint(doc: Document) -> str:
    lines = []
    for section in doc.sections:
        label = section.heading or "(text before the first heading)"
        blocks = ", ".join(repr(b.id) for b in section.blocks) or "none"
        lines.append(f"- section {section.id!r} {label}: blocks {blocks}")
    return "\n".join(lines)


def _retry_message(*, doc: Document, result: DeltaResult | None, error: str | None) -> str:
    if result is not None:
        reasons = "\n".join(f"- operation {d['index']}: {d['reason']}" for d in result.skipped)
        wrong = ", ".join(repr(i) for i in result.wrong_ids) or "none"
        head = (f"None of your operations could be applied:\n{reasons}\n\n"
                f"Ids you used that do not exist where you used them: {wrong}.")
    else:
        head = f"Your answer could not be read as {{\"operations\": [...]}}: {error}"
    return (f"{head}\n\nThe document has exactly these sections and blocks:\n{_ids_hint(doc)}\n\n"
            "Answer again with operations against these ids only.")


def _ops_call(plan: Plan, messages: list[dict[str, Any]], attempt: RefreshAttempt,
              scope: str) -> list[Any]:
    """One ops call; ``LLMOutputError`` when the answer cannot be read, other LLM errors and
    the attempt's deadline as they come."""
    attempt.check()
    answer = get_llm(bank_id=plan.model.bank_id).structured(
        messages, schema=ANSWER_SCHEMA, name="delta_operations", strict=False,
        deadline=Deadline(max(attempt.remaining(), 0.001)), purpose="mental_model_delta",
    )
    attempt.add_usage(answer.usage)
    attempt.llm_calls.append({"scope": scope, "duration_ms": int(answer.duration_ms or 0)})
    operations = answer.data.get("operations") if isinstance(answer.data, dict) else None
    if not isinstance(operations, list):
        raise LLMOutputError("the answer has no 'operations' list")
    return operations


def _record(attempt: RefreshAttempt, result: DeltaResult, ask: int) -> None:
    ops = attempt.delta_operations or {"applied": [], "skipped": []}
    ops["applied"] += [{**entry, "attempt": ask} for entry in result.applied]
    ops["skipped"] += [{**entry, "attempt": ask} for entry in result.skipped]
    attempt.delta_operations = ops


def _delta_fail(message: str, reason: str) -> RefreshFailed:
    return refused(f"{message}{DELTA_UNTOUCHED}",
                   outcome=RefreshOutcome.REFRESH_FAILED_DELTA_NOT_APPLIED, reason=reason)


def _still_cited(plan: Plan, retraction: Retraction | None) -> dict[str, list[dict[str, Any]]]:
    """What the document rests on, less the retracted facts (docs/behaviour.md#retracted-facts)."""
    previous = (plan.model.reflect_response or {}).get("based_on")
    if retraction is None:
        return normalise_based_on(previous)
    return prune_based_on(previous, retraction.ids)


def delta_refresh(plan: Plan, decided: Outcome, attempt: RefreshAttempt,
                  retraction: Retraction | None = None) -> Outcome:
    """docs/behaviour.md#edits-by-id: turn the window's cited facts, and the retracted ones
    (docs/behaviour.md#retracted-facts), into operations on the current document."""
    model = plan.model
    doc = document_for(model.content or "", model.document)
    facts = _window_facts(decided.based_on)
    messages = _delta_messages(plan, doc, facts, attempt.directives, retraction)
    attempt.delta_operations = {"applied": [], "skipped": []}
    result: DeltaResult | None = None
    for ask in (1, 2):
        error = None
        try:
            operations = _ops_call(plan, messages, attempt, scope=f"delta_{ask}")
        except LLMOutputError as exc:
            error = str(exc)
            operations = None
        except LLM_FAILURES as exc:
            raise llm_failure(exc, step=DELTA_OPERATIONS, limit=attempt.limit) from exc
        if operations is not None:
            result = apply_operations(doc, operations)
            _record(attempt, result, ask)
            if not result.all_dropped:
                break
        if ask == 2:
            if operations is None:
                raise _delta_fail(f"the delta operations answer could not be read on the retry: {error}",
                                  RefreshFailureReason.STRUCTURED_DOC_UNREADABLE)
            assert result is not None
            raise _delta_fail(
                f"every delta operation was dropped, twice (last: "
                f"{'; '.join(d['reason'] for d in result.skipped[:5])})",
                RefreshFailureReason.DELTA_OPS_ALL_SKIPPED)
        # Ask once more (docs/behaviour.md#dropped-edits-and-the-second-ask), showing the answer,
        # what was wrong with it and the real ids.
        if operations is None:
            answer_text, retry = "(unreadable)", _retry_message(doc=doc, result=None, error=error)
        else:
            answer_text = json.dumps({"operations": operations}, ensure_ascii=False)
            retry = _retry_message(doc=doc, result=result, error=None)
        messages = [*messages, {"role": "assistant", "content": answer_text},
                    {"role": "user", "content": retry}]
    assert result is not None
    if retraction is not None and not acted_on(result.applied):
        raise RetractionIgnored
    if result.skipped:
        attempt.warnings.append(
            f"{len(attempt.delta_operations['skipped'])} delta operation(s) were dropped; see "
            "delta_operations.skipped for what did not make it into the document")
    merged = render(result.document)
    if not merged.strip():
        if retraction is not None:  # what is left to say is the full answer's to write
            raise RetractionIgnored
        raise _delta_fail("the delta operations would leave the document empty",
                          RefreshFailureReason.DELTA_NOT_APPLIED)
    if retraction is not None:
        retraction.applied = True
    current = model.content or ""
    return replace(
        decided,
        outcome=RefreshOutcome.CONTENT_UNCHANGED if merged == current
        else RefreshOutcome.CONTENT_WRITTEN,
        content=merged,
        document=result.document.as_json(),
        based_on=_accumulate(_still_cited(plan, retraction), decided.based_on),
        mental_models=_dedupe([*((model.reflect_response or {}).get("mental_models") or []),
                               *decided.mental_models]),
        delta_operations=attempt.delta_operations,
    )


def _dedupe(entries: list[Any]) -> list[Any]:
    seen: set[str] = set()
    out = []
    for entry in entries:
        key = str(entry.get("id")) if isinstance(entry, dict) else repr(entry)
        if key not in seen:
            seen.add(key)
            out.append(entry)
    return out


def _accumulate(previous: Any, new: dict[str, list[dict[str, Any]]]) -> dict[str, list[dict[str, Any]]]:
    """docs/behaviour.md#cumulative-grounding: this refresh's citations merged into everything the
    document already rested on, deduplicated by id (the newer entry of an id wins: an updated
    observation's text)."""
    old = normalise_based_on(previous if isinstance(previous, dict) else None)
    merged = {}
    for key in BASED_ON_KEYS:
        if key == "directives":
            # What this refresh applied, not every directive any earlier one did.
            merged[key] = list(new.get(key) or [])
            continue
        fresh = {str(e.get("id")): e for e in new.get(key) or [] if isinstance(e, dict)}
        kept = [e for e in old[key] if isinstance(e, dict) and str(e.get("id")) not in fresh]
        merged[key] = _dedupe([*kept, *fresh.values()])
    return merged
