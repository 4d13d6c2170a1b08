"""``hindsight kb …``: the knowledge base over its HTTP API (wiring only, as ``app``)::

    hindsight kb tree BANK [--tags a,b] [--tags-match any]
    hindsight kb create-folder BANK NAME [--parent FOLDER_ID]
    hindsight kb create-page BANK NAME QUERY [--parent FOLDER_ID] [--tags a,b] [--max-tokens N]
                                             [--trigger-mode delta|full] [--fact-types a,b]
                                             [--wait]
    hindsight kb get BANK PAGE_ID
    hindsight kb search BANK QUERY [--limit N] [--tags a,b] [--tags-match any]
    hindsight kb move BANK NODE_ID (--to FOLDER_ID | --root)
    hindsight kb rename BANK NODE_ID NAME
    hindsight kb delete BANK NODE_ID -y
    hindsight kb export BANK [--dir DIR]

Registered on the ``hindsight`` app by ``hindsight.surfaces.cli`` (``__init__``).
"""

from __future__ import annotations

from pathlib import Path, PurePosixPath
from typing import Annotated, Any

import typer
from rich.markdown import Markdown
from rich.tree import Tree

from hindsight.infra.vocabulary import RefreshMode, TagsMatch
from hindsight.surfaces.cli import render
from hindsight.surfaces.cli.api import ApiError
from hindsight.surfaces.cli.app import (
    Bank,
    Output,
    OutputOpt,
    WaitOpt,
    _answer,
    _create_and_follow,
    _settings,
    _show,
    _tags,
)

kb_app = typer.Typer(help="The knowledge base: folders and pages (pages are mental models).",
                     no_args_is_help=True)

NodeId = Annotated[str, typer.Argument(metavar="NODE_ID", help="A folder (kf-…) or page (kp-…).",
                                       show_default=False)]
TagsOpt = Annotated[str | None, typer.Option("--tags", help="Comma-separated tags.")]
TagsMatchOpt = Annotated[TagsMatch | None, typer.Option("--tags-match")]
ParentOpt = Annotated[str | None, typer.Option("--parent", help="Parent folder id (default: "
                                                                "the root).")]


def _label(node: dict[str, Any]) -> str:
    if node["kind"] == "folder":
        return f"[bold]{node['name']}/[/] [dim]{node['id']}[/]"
    flags = []
    if node.get("is_stale"):
        flags.append("[yellow]stale[/]")
    if node.get("last_refresh_failed_at"):
        flags.append("[red]refresh failed[/]")
    suffix = f" ({', '.join(flags)})" if flags else ""
    return f"{node['name']} [dim]{node['id']}[/]{suffix}"


def _tree(body: dict[str, Any]) -> None:
    root = Tree("[bold]Knowledge base[/]")
    stack = [(root, node) for node in reversed(body["roots"])]
    while stack:
        parent, node = stack.pop()
        branch = parent.add(_label(node))
        stack += [(branch, child) for child in reversed(node.get("children") or [])]
    if not body["roots"]:
        root.add("[dim]no folders or pages yet[/]")
    render.out.print(root)


def _page(page: dict[str, Any]) -> None:
    render.out.print(render.key_values(page["name"], [
        ("id", page["id"]), ("type", page["type"]), ("question", page["description"]),
        ("tags", page["tags"]), ("refreshed", page["timestamp"]),
    ]))
    render.out.print(Markdown(page["body"] or "_No content yet._"))


def _hits(body: dict[str, Any]) -> None:
    for hit in body["results"]:
        render.out.print(f"[bold]{hit['name']}[/] [dim]{hit['id']}[/]  score {hit['score']:.3f}")
        render.out.print(f"  {' '.join(hit['snippet'].split())[:160]}", markup=False)
    if not body["results"]:
        render.message("no pages match")


def _bundle(body: dict[str, Any]) -> None:
    for item in body["files"]:
        render.out.print(item["path"], markup=False)


@kb_app.command("tree")
def kb_tree(ctx: typer.Context, bank: Bank, tags: TagsOpt = None,
            tags_match: TagsMatchOpt = None, output: OutputOpt = None) -> None:
    """The folders and pages, each page with its staleness."""
    settings = _settings(ctx)
    with settings.api() as api:
        body = api.kb_tree(bank, tags=_tags(tags), tags_match=tags_match and tags_match.value)
    _show(settings, output, body, _tree)


@kb_app.command("create-folder")
def kb_create_folder(ctx: typer.Context, bank: Bank,
                     name: Annotated[str, typer.Argument(metavar="NAME", show_default=False)],
                     parent: ParentOpt = None, output: OutputOpt = None) -> None:
    """Create a folder (at the root unless --parent)."""
    settings = _settings(ctx)
    with settings.api() as api:
        node = api.kb_folder_create(bank, {"name": name, "parent_id": parent})
    _answer(settings, output, node, f"Created folder {node['id']}")


@kb_app.command("create-page")
def kb_create_page(
    ctx: typer.Context,
    bank: Bank,
    name: Annotated[str, typer.Argument(metavar="NAME", show_default=False)],
    source_query: Annotated[str, typer.Argument(metavar="QUERY", help="The question it answers.",
                                                show_default=False)],
    parent: ParentOpt = None,
    tags: TagsOpt = None,
    max_tokens: Annotated[int | None, typer.Option("--max-tokens")] = None,
    trigger_mode: Annotated[RefreshMode | None, typer.Option("--trigger-mode")] = None,
    fact_types: Annotated[str | None, typer.Option(
        "--fact-types", help="Comma-separated (default for a page: observation).")] = None,
    wait: WaitOpt = False,
    output: OutputOpt = None,
) -> None:
    """Create a page (a mental model); its first refresh runs in the background."""
    settings = _settings(ctx)
    trigger: dict[str, Any] = {}
    if trigger_mode is not None:
        trigger["mode"] = trigger_mode.value
    if fact_types is not None:
        trigger["fact_types"] = _tags(fact_types)
    body: dict[str, Any] = {"name": name, "source_query": source_query, "parent_id": parent,
                            "tags": _tags(tags), "max_tokens": max_tokens,
                            "trigger": trigger or None}
    _create_and_follow(
        settings, output, bank, wait,
        submit=lambda api: api.kb_page_create(bank, body),
        created=lambda result: f"Created page {result['page_id']}",
        queued=lambda result: (f"(mental model {result['mental_model_id']}, "
                               f"refresh operation {result['operation_id']})"),
    )


@kb_app.command("get")
def kb_get(ctx: typer.Context, bank: Bank,
           page_id: Annotated[str, typer.Argument(metavar="PAGE_ID", show_default=False)],
           markdown: Annotated[bool, typer.Option(
               "--markdown", help="Print the page's markdown document (frontmatter + body).")
           ] = False,
           output: OutputOpt = None) -> None:
    """Read a page."""
    settings = _settings(ctx)
    with settings.api() as api:
        page = api.kb_page_get(bank, page_id)
    if markdown:
        render.out.print(page["markdown"], markup=False, end="")
        return
    _show(settings, output, page, _page)


@kb_app.command("search")
def kb_search(ctx: typer.Context, bank: Bank,
              query: Annotated[str, typer.Argument(metavar="QUERY", show_default=False)],
              limit: Annotated[int | None, typer.Option("--limit", help="1..50")] = None,
              tags: TagsOpt = None, tags_match: TagsMatchOpt = None,
              output: OutputOpt = None) -> None:
    """Pages ranked for QUERY (keyword + semantic)."""
    settings = _settings(ctx)
    with settings.api() as api:
        body = api.kb_search(bank, q=query, limit=limit, tags=_tags(tags),
                             tags_match=tags_match and tags_match.value)
    _show(settings, output, body, _hits)


def _update(ctx: typer.Context, bank: str, node_id: str, body: dict[str, Any],
            output: Output | None, done: str) -> None:
    settings = _settings(ctx)
    with settings.api() as api:
        node = api.kb_node_update(bank, node_id, body)
    _answer(settings, output, node, done)


@kb_app.command("move")
def kb_move(ctx: typer.Context, bank: Bank, node_id: NodeId,
            to: Annotated[str | None, typer.Option("--to", help="Destination folder id.")] = None,
            root: Annotated[bool, typer.Option("--root", help="Move to the top level.")] = False,
            output: OutputOpt = None) -> None:
    """Move a folder or page under another folder (or to the root)."""
    if (to is None) == (not root):
        raise typer.BadParameter("give exactly one of --to FOLDER_ID or --root")
    _update(ctx, bank, node_id, {"parent_id": to}, output,
            f"Moved {node_id} to {'the root' if root else to}")


@kb_app.command("rename")
def kb_rename(ctx: typer.Context, bank: Bank, node_id: NodeId,
              name: Annotated[str, typer.Argument(metavar="NAME", show_default=False)],
              output: OutputOpt = None) -> None:
    """Rename a folder or page (a page's mental model too)."""
    _update(ctx, bank, node_id, {"name": name}, output, f"Renamed {node_id} to {name!r}")


@kb_app.command("delete")
def kb_delete(ctx: typer.Context, bank: Bank, node_id: NodeId,
              yes: Annotated[bool, typer.Option("--yes", "-y",
                                                help="Do not ask for confirmation.")] = False,
              output: OutputOpt = None) -> None:
    """Delete a folder with everything under it, or a page (with its mental model)."""
    settings = _settings(ctx)
    if not yes:
        typer.confirm(f"Delete {node_id!r} and everything under it from bank {bank!r}?",
                      abort=True, err=True)
    with settings.api() as api:
        _answer(settings, output, api.kb_node_delete(bank, node_id), f"Deleted {node_id}")


@kb_app.command("export")
def kb_export(ctx: typer.Context, bank: Bank,
              directory: Annotated[Path | None, typer.Option(
                  "--dir", help="Write the bundle's files here (else print the bundle).")] = None,
              output: OutputOpt = None) -> None:
    """The whole knowledge base as a markdown bundle (index.md, one file per page, logs)."""
    settings = _settings(ctx)
    with settings.api() as api:
        bundle = api.kb_export(bank)
    if directory is None:
        _show(settings, output, bundle, _bundle)
        return
    directory.mkdir(parents=True, exist_ok=True)
    for item in bundle["files"]:
        name = PurePosixPath(item["path"])
        # The server names the files (index.md, <id>.md): never a path out of the directory.
        if name.name != item["path"] or name.name in ("", ".", ".."):
            raise ApiError(0, f"refusing to write an export file named {item['path']!r}")
        (directory / name.name).write_text(item["content"], encoding="utf-8")
    render.message(f"Wrote {len(bundle['files'])} files to {directory}")
