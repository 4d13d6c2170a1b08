"""How the CLI prints: JSON for scripts, rich tables and panels for people.

``--output json`` writes the server's body as JSON on stdout, nothing else (progress and errors
go to stderr). ``table`` renders each kind of answer readably; diffs are coloured.
"""

from __future__ import annotations

import difflib
import json
import sys
from collections.abc import Iterable, Sequence
from typing import Any

from rich.console import Console, Group
from rich.markdown import Markdown
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from hindsight.infra.vocabulary import OperationStatus

out = Console(highlight=False, soft_wrap=False)
err = Console(stderr=True, highlight=False)


def emit_json(body: Any) -> None:
    sys.stdout.write(json.dumps(body, indent=2, ensure_ascii=False) + "\n")
    sys.stdout.flush()


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, list):
        return ", ".join(str(v) for v in value) or "-"
    if isinstance(value, dict):
        return json.dumps(value, ensure_ascii=False)
    return str(value)


def _when(value: Any) -> str:
    """An ISO timestamp to the minute ("2026-01-05 08:13"), the width a list can spare; the
    exact value is in ``get`` and ``-o json``."""
    if not isinstance(value, str) or len(value) < 16 or value[10] != "T":
        return _cell(value)
    return f"{value[:10]} {value[11:16]}"


# Below this a column's text wraps into a ribbon nobody reads: the list leaves it out instead.
MIN_COLUMN_WIDTH = 12
# A heavy-box table: one border before the first column, then per column its two padding
# spaces and the border after it.
_BORDER, _PER_COLUMN = 1, 3


def list_table(title: str, columns: Sequence[tuple[str, Sequence[Any]]], *,
               keep_first: Sequence[str]) -> Table:
    """A list that fits the console with its ids whole: the first column (the ids, which people
    copy into the next command) never wraps and is as wide as its longest value; the other
    columns, in the order ``keep_first`` ranks them, are kept while each can still have
    ``MIN_COLUMN_WIDTH`` (or its own narrower width), and the caption names those left out."""
    (id_header, ids), others = columns[0], columns[1:]
    id_width = max([len(id_header), *(len(_plain(v)) for v in ids)])
    room = out.width - _BORDER - id_width - _PER_COLUMN
    kept: set[str] = set()
    for header in keep_first:
        cells = dict(others)[header]
        natural = max([len(header), *(len(_plain(v)) for v in cells)])
        need = min(natural, MIN_COLUMN_WIDTH) + _PER_COLUMN
        if need > room:
            break
        kept.add(header)
        room -= need
    shown = [(header, cells) for header, cells in others if header in kept]
    left_out = [header for header, _ in others if header not in kept]
    caption = f"left out at this width: {', '.join(left_out)} (-o json has all)" if left_out else None
    table = Table(title=title, title_justify="left", caption=caption, caption_justify="left")
    table.add_column(id_header, no_wrap=True, min_width=id_width)
    for header, _ in shown:
        table.add_column(header, overflow="fold")
    for index, row_id in enumerate(ids):
        table.add_row(row_id, *(cells[index] for _, cells in shown))
    return table


def _plain(value: Any) -> str:
    return value.plain if isinstance(value, Text) else str(value)


def key_values(title: str, rows: Iterable[tuple[str, Any]]) -> Table:
    table = Table(title=title, show_header=False, title_justify="left", box=None, pad_edge=False)
    table.add_column(style="bold cyan", no_wrap=True)
    table.add_column(overflow="fold")
    for key, value in rows:
        table.add_row(key, _cell(value))
    return table


def coloured_diff(diff: str) -> Text:
    text = Text()
    for line in diff.splitlines():
        if line.startswith(("+++", "---")):
            style = "bold"
        elif line.startswith("+"):
            style = "green"
        elif line.startswith("-"):
            style = "red"
        elif line.startswith("@@"):
            style = "cyan"
        else:
            style = ""
        text.append(line + "\n", style=style)
    return text


def _lines(text: str) -> list[str]:
    # Every line newline-terminated, so a changed last line never runs into its replacement.
    return [line if line.endswith("\n") else line + "\n" for line in text.splitlines(True)]


def unified_diff(before: str, after: str, *, before_name: str, after_name: str) -> str:
    return "".join(difflib.unified_diff(
        _lines(before), _lines(after), fromfile=before_name, tofile=after_name,
    ))


# ---------------------------------------------------------------------------------------------
# mental models


def mental_model(model: dict[str, Any]) -> None:
    trigger = model.get("trigger") or {}
    rows: list[tuple[str, Any]] = [
        ("id", model.get("id")),
        ("name", model.get("name")),
        ("bank", model.get("bank_id")),
        ("source query", model.get("source_query")),
        ("tags", model.get("tags")),
        ("stale", model.get("is_stale")),
        ("last refreshed", model.get("last_refreshed_at")),
        ("last memory seen", model.get("last_memory_seen_at")),
        ("last refresh failed", model.get("last_refresh_failed_at")),
        ("max tokens", model.get("max_tokens")),
    ]
    set_trigger = {k: v for k, v in trigger.items() if v not in (None, False, [], {})}
    if set_trigger:
        rows.append(("trigger", set_trigger))
    based_on = (model.get("reflect_response") or {}).get("based_on") or {}
    cited = sum(len(v) for v in based_on.values() if isinstance(v, list))
    if model.get("reflect_response") is not None:
        rows.append(("based on", f"{cited} memories/models"))
    out.print(key_values(f"Mental model {model.get('id')}", rows))
    content = model.get("content")
    if content:
        out.print(Panel(Markdown(content), title="content", title_align="left"))
    elif content == "":
        out.print(Text("(no content yet)", style="dim"))


def mental_model_list(body: dict[str, Any]) -> None:
    items = body.get("items") or []
    out.print(list_table(f"Mental models ({body.get('total', len(items))})", [
        ("id", [_cell(item.get("id")) for item in items]),
        ("name", [_cell(item.get("name")) for item in items]),
        ("tags", [_cell(item.get("tags")) for item in items]),
        ("stale", [Text(_cell(item.get("is_stale")),
                        style="yellow" if item.get("is_stale") else "green") for item in items]),
        ("last refreshed", [_when(item.get("last_refreshed_at")) for item in items]),
        ("refresh failed", [Text(_when(item.get("last_refresh_failed_at")),
                                 style="red" if item.get("last_refresh_failed_at") else "")
                            for item in items]),
    ], keep_first=("stale", "name", "tags", "refresh failed", "last refreshed")))


def history(entries: list[dict[str, Any]], current_content: str | None) -> None:
    if not entries:
        out.print(Text("No history yet.", style="dim"))
        return
    newer = current_content
    newer_name = "current"
    for index, entry in enumerate(entries):
        kind = entry.get("kind", "version")
        title = f"#{len(entries) - index}  {entry.get('changed_at')}  {kind}"
        if entry.get("id") is not None:  # what `mental-model restore` takes
            title += f"  id {entry['id']}"
        if entry.get("cause"):
            title += f" ({entry['cause']})"
        if kind == "refresh_failed":
            body = key_values("", [("outcome", entry.get("outcome")),
                                   ("reason", entry.get("failure_reason")),
                                   ("error", entry.get("error_message")),
                                   ("operation", entry.get("operation_id"))])
            out.print(Panel(body, title=title, title_align="left", border_style="red"))
            continue
        previous = entry.get("previous_content") or ""
        parts: list[Any] = []
        changes = entry.get("changes")
        if changes is not None:  # the server's own diff of this change
            parts.append(coloured_diff(changes.get("unified") or "")
                         if changes.get("changed") else Text("(content unchanged)", style="dim"))
        elif newer is not None:
            diff = unified_diff(previous, newer, before_name="before", after_name=newer_name)
            parts.append(coloured_diff(diff) if diff else Text("(content unchanged)", style="dim"))
        else:
            parts.append(Text(previous or "(empty)"))
        out.print(Panel(Group(*parts), title=title, title_align="left"))
        newer = previous
        newer_name = f"#{len(entries) - index}"


def dry_run(preview: dict[str, Any]) -> None:
    rows = [
        ("mental model", preview.get("mental_model_id")),
        ("mode", f"{preview.get('effective_mode')} (requested {preview.get('requested_mode')})"),
        ("fallback reason", preview.get("mode_fallback_reason")),
        ("outcome", preview.get("outcome")),
        ("would persist", preview.get("would_persist")),
        ("facts read", len(preview.get("facts") or [])),
        ("warnings", preview.get("warnings")),
        ("duration ms", preview.get("duration_ms")),
    ]
    out.print(key_values("Dry run (nothing was written)", rows))
    current, candidate = preview.get("current_content"), preview.get("preview_content")
    if isinstance(current, str) and isinstance(candidate, str):
        diff = unified_diff(current, candidate, before_name="current", after_name="preview")
    else:
        diff = preview.get("diff") or ""
    if diff:
        out.print(Panel(coloured_diff(diff), title="diff", title_align="left"))
    else:
        out.print(Text("(no change to the content)", style="dim"))


# ---------------------------------------------------------------------------------------------
# operations and banks


OPERATION_STYLES: dict[str, str] = {OperationStatus.COMPLETED: "green", OperationStatus.FAILED: "red",
                    OperationStatus.CANCELLED: "yellow"}


def operation(op: dict[str, Any]) -> None:
    rows = [(key, op.get(key)) for key in (
        "operation_id", "status", "operation_type", "mental_model_id", "created_at",
        "updated_at", "completed_at", "retry_count", "next_retry_at", "error_message", "details",
    )]
    out.print(key_values(f"Operation {op.get('operation_id')}", rows))


def operation_list(body: dict[str, Any]) -> None:
    ops = body.get("operations") or []
    out.print(list_table(f"Operations ({body.get('total', len(ops))})", [
        ("id", [_cell(op.get("id")) for op in ops]),
        ("type", [_cell(op.get("task_type")) for op in ops]),
        ("status", [Text(str(op.get("status")),
                         style=OPERATION_STYLES.get(str(op.get("status")), "")) for op in ops]),
        ("created", [_when(op.get("created_at")) for op in ops]),
        ("retries", [_cell(op.get("retry_count")) for op in ops]),
        ("error", [_cell(op.get("error_message")) for op in ops]),
    ], keep_first=("status", "error", "type", "created", "retries")))


def bank_list(body: dict[str, Any]) -> None:
    banks = body.get("banks") or []
    out.print(list_table(f"Banks ({body.get('total', len(banks))})", [
        ("bank", [_cell(bank.get("bank_id")) for bank in banks]),
        ("name", [_cell(bank.get("name")) for bank in banks]),
        ("facts", [_cell(bank.get("fact_count")) for bank in banks]),
        ("last write", [_when(bank.get("last_write_at")) for bank in banks]),
    ], keep_first=("facts", "last write", "name")))


# What a refresh's outcome means where the word alone leaves a first user guessing.
OUTCOME_HINTS = {
    "content_preserved_no_new_facts": "no memory in the model's scope (its tags): nothing to write",
}


def operation_ended(op: dict[str, Any], operation_id: str, *, to_stderr: bool) -> None:
    """How a followed operation ended, in one line: its status, the refresh's outcome (a
    "completed" refresh may have written nothing) and, when it failed, the reason and error."""
    state = str(op.get("status"))
    details = op.get("details") or {}
    line = f"operation {op.get('operation_id') or operation_id}: {state}"
    outcome = details.get("outcome")
    if outcome:
        line += f", outcome {outcome}"
        if outcome in OUTCOME_HINTS:
            line += f" ({OUTCOME_HINTS[outcome]})"
    if details.get("failure_reason"):
        line += f", reason {details['failure_reason']}"
    if op.get("error_message"):
        line += f" — {op['error_message']}"
    # One line however long: the terminal wraps it, and a script reads it whole.
    (err if to_stderr else out).print(Text(line, style=OPERATION_STYLES.get(state, "")),
                                      soft_wrap=True)


def bank_stats(stats: dict[str, Any]) -> None:
    keys = ("bank_id", "total_nodes", "total_documents", "nodes_by_fact_type",
            "total_observations", "pending_consolidation", "pending_operations",
            "failed_operations", "operations_by_status", "last_memory_write_at",
            "last_consolidated_at")
    out.print(key_values(f"Bank {stats.get('bank_id')}", [(k, stats.get(k)) for k in keys]))


def message(text: str, style: str = "") -> None:
    out.print(Text(text, style=style))
