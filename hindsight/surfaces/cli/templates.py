"""``hindsight bank template export|import|schema``: a bank's setup (config overrides, mental
models, directives) as upstream 1.1.0's template manifest, over the HTTP API (wiring only, as
``app``)::

    hindsight bank template export BANK [--file FILE]
    hindsight bank template import BANK FILE [--dry-run]
    hindsight bank template schema [--file FILE]

An export or the schema is written to FILE, else to stdout (JSON). An import reads FILE (``-``:
stdin) and shows what was (or, with ``--dry-run``, would be) created, updated and left alone.
Registered on the ``bank`` group by ``hindsight.surfaces.cli`` (``__init__``).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from hindsight.surfaces.cli import render
from hindsight.surfaces.cli.app import Bank, Output, OutputOpt, _settings

template_app = typer.Typer(help="Bank templates: a bank's config, mental models and directives "
                                "as a manifest.", no_args_is_help=True)

FileOpt = Annotated[Path | None, typer.Option("--file", "-f", help="Write it here instead of "
                                              "stdout.")]


def _write(body: Any, file: Path | None, what: str) -> None:
    text = json.dumps(body, indent=2, ensure_ascii=False) + "\n"
    if file is None:
        sys.stdout.write(text)
        return
    file.write_text(text)
    render.err.print(f"{what} written to {file}.", markup=False, highlight=False)


@template_app.command("export")
def template_export(ctx: typer.Context, bank: Bank, file: FileOpt = None) -> None:
    """Write BANK's template manifest."""
    with _settings(ctx).api() as api:
        manifest = api.bank_template_export(bank)
    _write(manifest, file, f"Template of bank {bank}")


@template_app.command("schema")
def template_schema(ctx: typer.Context, file: FileOpt = None) -> None:
    """Write the manifest's JSON Schema."""
    with _settings(ctx).api() as api:
        schema = api.bank_template_schema()
    _write(schema, file, "The manifest's JSON Schema")


def _read(file: str) -> Any:
    try:
        text = sys.stdin.read() if file == "-" else Path(file).read_text()
    except OSError as exc:
        raise typer.BadParameter(f"cannot read {file}: {exc.strerror}", param_hint="FILE") from None
    try:
        return json.loads(text)
    except ValueError as exc:
        raise typer.BadParameter(f"{file} is not JSON: {exc}", param_hint="FILE") from None


def _summary(result: dict[str, Any]) -> None:
    verb = "would be" if result.get("dry_run") else "were"
    rows = [(f"config {verb} applied", "yes" if result.get("config_applied") else "no")]
    for kind in ("mental_models", "directives"):
        for change in ("created", "updated", "unchanged"):
            names = result.get(f"{kind}_{change}") or []
            rows.append((f"{kind.replace('_', ' ')} {change}", ", ".join(names) or "-"))
    if result.get("operation_ids"):
        rows.append(("refreshes queued", ", ".join(result["operation_ids"])))
    title = f"Template {'dry run' if result.get('dry_run') else 'import'} into {result['bank_id']}"
    render.out.print(render.key_values(title, rows))


@template_app.command("import")
def template_import(
    ctx: typer.Context, bank: Bank,
    file: Annotated[str, typer.Argument(metavar="FILE", help="The manifest (JSON; - for "
                                        "stdin).", show_default=False)],
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Say what the import would do; "
                                          "change nothing.")] = False,
    output: OutputOpt = None,
) -> None:
    """Apply a manifest to BANK (created if it does not exist)."""
    manifest = _read(file)
    settings = _settings(ctx)
    with settings.api() as api:
        result = api.bank_template_import(bank, manifest, dry_run=dry_run)
    if settings.output_for(output) is Output.json:
        render.emit_json(result)
    else:
        _summary(result)
