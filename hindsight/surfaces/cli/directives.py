"""``hindsight directive …``: a bank's directives over their HTTP API (wiring only, as ``app``)::

    hindsight directive list BANK [--tags a,b] [--tags-match any|all|exact] [--all]
                                  [--limit N] [--offset N]
    hindsight directive get BANK DIRECTIVE_ID
    hindsight directive create BANK NAME CONTENT [--priority N] [--inactive] [--tags a,b]
    hindsight directive update BANK DIRECTIVE_ID [--name N] [--content C] [--priority N]
                                                 [--active true|false] [--tags a,b]
    hindsight directive delete BANK DIRECTIVE_ID -y

Registered on the ``hindsight`` app by ``hindsight.surfaces.cli`` (``__init__``).
"""

from __future__ import annotations

from typing import Annotated, Any

import typer
from rich.markup import escape

from hindsight.infra.vocabulary import LIST_TAGS_MATCH_MODES
from hindsight.surfaces.cli import render
from hindsight.surfaces.cli.app import (
    Bank,
    OutputOpt,
    _answer,
    _settings,
    _show,
    _tags,
    _true_false,
)

directive_app = typer.Typer(help="Directives: a bank's hard rules, put into every reflect and "
                                 "refresh prompt.", no_args_is_help=True)

DirectiveId = Annotated[str, typer.Argument(metavar="DIRECTIVE_ID", show_default=False)]
TagsOpt = Annotated[str | None, typer.Option(
    "--tags", help="Comma-separated tags ('' for none: a global directive).")]


def _directive(body: dict[str, Any]) -> None:
    render.out.print(render.key_values(escape(body["name"]), [
        ("id", body["id"]), ("priority", body["priority"]), ("active", body["is_active"]),
        ("tags", body["tags"]), ("updated", body["updated_at"]), ("content", body["content"]),
    ]))


def _directives(body: dict[str, Any]) -> None:
    items = body["items"]
    if not items:
        render.message("no directives")
        return
    render.out.print(render.list_table(
        f"Directives ({body['total']})",
        [("id", [d["id"] for d in items]),
         ("name", [d["name"] for d in items]),
         ("priority", [str(d["priority"]) for d in items]),
         ("active", ["yes" if d["is_active"] else "no" for d in items]),
         ("tags", [", ".join(d["tags"]) for d in items]),
         ("content", [d["content"] for d in items])],
        keep_first=["name", "priority", "content", "active", "tags"],
    ))


@directive_app.command("list")
def directive_list(
    ctx: typer.Context, bank: Bank, tags: TagsOpt = None,
    tags_match: Annotated[str | None, typer.Option(
        "--tags-match", help=f"{'|'.join(LIST_TAGS_MATCH_MODES)} (default any)")] = None,
    include_inactive: Annotated[bool, typer.Option("--all", help="Inactive ones too.")] = False,
    limit: Annotated[int | None, typer.Option("--limit", help="1..1000")] = None,
    offset: Annotated[int | None, typer.Option("--offset")] = None,
    output: OutputOpt = None,
) -> None:
    """The bank's directives, highest priority first (with --tags: the ones a reflect with
    those tags applies)."""
    settings = _settings(ctx)
    with settings.api() as api:
        body = api.directive_list(bank, tags=_tags(tags), tags_match=tags_match,
                                  active_only="false" if include_inactive else None,
                                  limit=limit, offset=offset)
    _show(settings, output, body, _directives)


@directive_app.command("get")
def directive_get(ctx: typer.Context, bank: Bank, directive_id: DirectiveId,
                  output: OutputOpt = None) -> None:
    """One directive."""
    settings = _settings(ctx)
    with settings.api() as api:
        body = api.directive_get(bank, directive_id)
    _show(settings, output, body, _directive)


@directive_app.command("create")
def directive_create(
    ctx: typer.Context, bank: Bank,
    name: Annotated[str, typer.Argument(metavar="NAME", show_default=False)],
    content: Annotated[str, typer.Argument(metavar="CONTENT", help="The rule itself.",
                                           show_default=False)],
    priority: Annotated[int, typer.Option("--priority", help="Higher comes first.")] = 0,
    inactive: Annotated[bool, typer.Option("--inactive", help="Create it switched off.")] = False,
    tags: TagsOpt = None,
    output: OutputOpt = None,
) -> None:
    """Create a directive (untagged: it applies to every reflect and refresh of the bank)."""
    settings = _settings(ctx)
    body = {"name": name, "content": content, "priority": priority, "is_active": not inactive,
            "tags": _tags(tags) or []}
    with settings.api() as api:
        created = api.directive_create(bank, body)
    _answer(settings, output, created, f"Created directive {created['id']}")


@directive_app.command("update")
def directive_update(
    ctx: typer.Context, bank: Bank, directive_id: DirectiveId,
    name: Annotated[str | None, typer.Option("--name")] = None,
    content: Annotated[str | None, typer.Option("--content")] = None,
    priority: Annotated[int | None, typer.Option("--priority")] = None,
    active: Annotated[str | None, typer.Option("--active", help="true or false")] = None,
    tags: TagsOpt = None,
    output: OutputOpt = None,
) -> None:
    """Change a directive: each option given replaces that field."""
    settings = _settings(ctx)
    body = {"name": name, "content": content, "priority": priority,
            "is_active": _true_false(active, "--active"), "tags": _tags(tags)}
    with settings.api() as api:
        updated = api.directive_update(bank, directive_id,
                                       {k: v for k, v in body.items() if v is not None})
    _answer(settings, output, updated, f"Updated directive {directive_id}")


@directive_app.command("delete")
def directive_delete(ctx: typer.Context, bank: Bank, directive_id: DirectiveId,
                     yes: Annotated[bool, typer.Option("--yes", "-y",
                                                       help="Do not ask for confirmation.")
                                    ] = False,
                     output: OutputOpt = None) -> None:
    """Delete a directive."""
    settings = _settings(ctx)
    if not yes:
        typer.confirm(f"Delete directive {directive_id!r} of bank {bank!r}?", abort=True,
                      err=True)
    with settings.api() as api:
        result = api.directive_delete(bank, directive_id)
    _answer(settings, output, result, f"Deleted directive {directive_id}")
