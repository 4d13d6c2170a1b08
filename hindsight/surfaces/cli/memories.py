"""``hindsight memory …``: one memory at a time over the HTTP API (wiring only, as ``app``)::

    hindsight memory list BANK [--state valid|invalidated] [--type T] [--document ID] [-q TEXT]
                               [--tags a,b] [--limit N] [--offset N]
    hindsight memory get BANK MEMORY_ID
    hindsight memory update BANK MEMORY_ID [--text T] [--context C] [--tags a,b]
                                           [--metadata key=value …] [--fact-type T]
    hindsight memory invalidate BANK MEMORY_ID [--reason R]
    hindsight memory restore BANK MEMORY_ID
    hindsight memory history BANK MEMORY_ID

Registered on the ``hindsight`` app by ``hindsight.surfaces.cli`` (``__init__``).
"""

from __future__ import annotations

from typing import Annotated, Any

import typer
from rich.markup import escape

from hindsight.infra.vocabulary import CURATED_FACT_TYPES, FACT_TYPES, MEMORY_STATES
from hindsight.surfaces.cli import render
from hindsight.surfaces.cli.app import Bank, Output, OutputOpt, _settings, _show, _tags

memory_app = typer.Typer(help="Memories one at a time: read, edit, invalidate, restore, "
                              "their history.", no_args_is_help=True)

MemoryId = Annotated[str, typer.Argument(metavar="MEMORY_ID", show_default=False)]


def _memory(body: dict[str, Any]) -> None:
    render.out.print(render.key_values(escape(body["text"]), [
        ("id", body["id"]), ("state", body["state"]), ("type", body["type"]),
        ("tags", body["tags"]), ("document", body["document_id"]),
        ("context", body["context"]), ("metadata", body["metadata"]),
        ("edited", body["edited_at"]), ("invalidated", body["invalidated_at"]),
        ("reason", body["invalidation_reason"]),
    ]))


def _memories(body: dict[str, Any]) -> None:
    items = body["items"]
    if not items:
        render.message("no memories")
        return
    render.out.print(render.list_table(
        f"Memories ({body['total']})",
        [("id", [m["id"] for m in items]),
         ("type", [m["fact_type"] for m in items]),
         ("state", [m["state"] for m in items]),
         ("tags", [", ".join(m["tags"]) for m in items]),
         ("text", [m["text"] for m in items])],
        keep_first=["text", "type", "state", "tags"],
    ))


def _history(body: list[dict[str, Any]]) -> None:
    if not body:
        render.message("no changes")
        return
    render.out.print(render.list_table(
        f"Changes ({len(body)})",
        [("kind", [h["kind"] for h in body]),
         ("reason", [h["reason"] or "" for h in body]),
         ("text before", [h["previous_text"] or "" for h in body]),
         ("changed", [h["changed_at"] for h in body]),
         ("tags before", [", ".join(h["previous_tags"]) for h in body])],
        keep_first=["reason", "text before"],
    ))


def _metadata(pairs: list[str] | None) -> dict[str, str] | None:
    if pairs is None:
        return None
    out: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise typer.BadParameter(f"{pair!r} is not key=value", param_hint="--metadata")
        out[key] = value
    return out


def _patch(ctx: typer.Context, bank: str, memory_id: str, body: dict[str, Any],
           output: Output | None) -> None:
    settings = _settings(ctx)
    with settings.api() as api:
        updated = api.memory_update(bank, memory_id, body)
    _show(settings, output, updated, _memory)


@memory_app.command("list")
def memory_list(
    ctx: typer.Context, bank: Bank,
    state: Annotated[str | None, typer.Option(
        "--state", help=f"{'|'.join(MEMORY_STATES)} (default valid: the live memories)")] = None,
    fact_type: Annotated[str | None, typer.Option(
        "--type", help="|".join(FACT_TYPES))] = None,
    document: Annotated[str | None, typer.Option("--document", help="A document id.")] = None,
    q: Annotated[str | None, typer.Option("-q", help="A substring of the text.")] = None,
    tags: Annotated[str | None, typer.Option("--tags", help="Comma-separated tags.")] = None,
    limit: Annotated[int | None, typer.Option("--limit", help="0..1000")] = None,
    offset: Annotated[int | None, typer.Option("--offset")] = None,
    output: OutputOpt = None,
) -> None:
    """The bank's memories, newest first (with --state invalidated: the archive)."""
    settings = _settings(ctx)
    with settings.api() as api:
        body = api.memory_list(bank, state=state, type=fact_type, document_id=document, q=q,
                               tags=_tags(tags), limit=limit, offset=offset)
    _show(settings, output, body, _memories)


@memory_app.command("get")
def memory_get(ctx: typer.Context, bank: Bank, memory_id: MemoryId,
               output: OutputOpt = None) -> None:
    """One memory, live or invalidated."""
    settings = _settings(ctx)
    with settings.api() as api:
        body = api.memory_get(bank, memory_id)
    _show(settings, output, body, _memory)


@memory_app.command("update")
def memory_update(
    ctx: typer.Context, bank: Bank, memory_id: MemoryId,
    text: Annotated[str | None, typer.Option(
        "--text", help="New text (embedded again; its observations are rebuilt).")] = None,
    context: Annotated[str | None, typer.Option("--context", help="'' clears it.")] = None,
    tags: Annotated[str | None, typer.Option(
        "--tags", help="Comma-separated tags ('' for none).")] = None,
    metadata: Annotated[list[str] | None, typer.Option(
        "--metadata", help="key=value (repeat it); replaces the metadata.")] = None,
    fact_type: Annotated[str | None, typer.Option(
        "--fact-type", help="|".join(CURATED_FACT_TYPES))] = None,
    output: OutputOpt = None,
) -> None:
    """Edit a memory: each option given replaces that field."""
    body = {"text": text, "context": context, "tags": _tags(tags),
            "metadata": _metadata(metadata), "fact_type": fact_type}
    body = {k: v for k, v in body.items() if v is not None}
    if not body:
        raise typer.BadParameter("give at least one of --text, --context, --tags, --metadata, "
                                 "--fact-type")
    _patch(ctx, bank, memory_id, body, output)


@memory_app.command("invalidate")
def memory_invalidate(
    ctx: typer.Context, bank: Bank, memory_id: MemoryId,
    reason: Annotated[str | None, typer.Option("--reason", help="Why (kept with it).")] = None,
    output: OutputOpt = None,
) -> None:
    """Invalidate a memory: it leaves recall and every page's scope (the pages that read it go
    stale), kept in the archive until restored."""
    body: dict[str, Any] = {"state": "invalidated"}
    if reason is not None:
        body["reason"] = reason
    _patch(ctx, bank, memory_id, body, output)


@memory_app.command("restore")
def memory_restore(ctx: typer.Context, bank: Bank, memory_id: MemoryId,
                   output: OutputOpt = None) -> None:
    """Bring an invalidated memory back, under its id."""
    _patch(ctx, bank, memory_id, {"state": "valid"}, output)


@memory_app.command("history")
def memory_history(ctx: typer.Context, bank: Bank, memory_id: MemoryId,
                   output: OutputOpt = None) -> None:
    """The memory's changes, oldest first, each with what it was before."""
    settings = _settings(ctx)
    with settings.api() as api:
        body = api.memory_history(bank, memory_id)
    _show(settings, output, body, _history)
