"""``hindsight bank export|import|clone``: a bank moved in upstream 1.1.0's archive, over the HTTP
API (wiring only, as ``app``)::

    hindsight bank export BANK [--file FILE] [--no-data] [--no-config] [--history]
    hindsight bank import BANK FILE [--target ID] [--merge [--conflict skip|replace|new-id]]
                                    [--no-data] [--no-config] [--history] [--wait]
    hindsight bank clone BANK TARGET [--no-data] [--no-config] [--history] [--wait]

An export always waits (the archive is the point) and writes the archive to FILE (``BANK.zip``
by default), streamed. An import uploads FILE streamed and, with ``--wait``, follows the
operation. Registered on the ``bank`` group by ``hindsight.surfaces.cli`` (``__init__``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from hindsight.surfaces.cli import render
from hindsight.surfaces.cli.app import (
    Bank,
    OutputOpt,
    WaitOpt,
    _finish_wait,
    _settings,
    _wait,
    bank_app,
)

NoData = Annotated[bool, typer.Option("--no-data", help="Leave out the memories, mental "
                                      "models and knowledge base.")]
NoConfig = Annotated[bool, typer.Option("--no-config", help="Leave out the config overrides "
                                        "and directives.")]
History = Annotated[bool, typer.Option("--history", help="Carry the LLM request log too.")]


def _scope(no_data: bool, no_config: bool, history: bool) -> dict[str, Any]:
    return {"include_data": str(not no_data).lower(),
            "include_bank_config": str(not no_config).lower(),
            "include_history": str(history).lower()}


def _submitted(ctx: typer.Context, output: Any, bank: str, wait: bool, result: dict[str, Any],
               what: str) -> None:
    settings = _settings(ctx)
    mode = settings.output_for(output)
    if wait:
        with settings.api() as api:
            _finish_wait(_wait(settings, api, bank, result["operation_id"]), mode, result)
        return
    if mode.value == "json":
        render.emit_json(result)
    else:
        render.message(f"{what}: operation {result['operation_id']} queued "
                       f"(hindsight operation get {bank} {result['operation_id']}).")


@bank_app.command("export")
def bank_export(
    ctx: typer.Context,
    bank: Bank,
    file: Annotated[Path | None, typer.Option("--file", "-f", help="Where to write the "
                                              "archive (default BANK.zip).")] = None,
    no_data: NoData = False, no_config: NoConfig = False, history: History = False,
    output: OutputOpt = None,
) -> None:
    """Export a bank as an archive (waits for the export, then downloads it)."""
    settings = _settings(ctx)
    target = file or Path(f"{bank}.zip")
    with settings.api() as api:
        result = api.bank_export(bank, **_scope(no_data, no_config, history))
        op = _wait(settings, api, bank, result["operation_id"])
        if op.get("status") != "completed":
            _finish_wait(op, settings.output_for(output), result)
        url = str((op.get("result_metadata") or {}).get("download_url") or "")
        with target.open("wb") as out:
            size = api.file_download(url, out)
    if settings.output_for(output).value == "json":
        render.emit_json({**result, "status": op.get("status"), "file": str(target),
                          "byte_size": size})
    else:
        render.message(f"Bank {bank} exported to {target} ({size} bytes).")


@bank_app.command("import")
def bank_import(
    ctx: typer.Context,
    bank: Annotated[str, typer.Argument(metavar="BANK", help="The bank the operation is "
                                        "recorded against (a merge writes into it).",
                                        show_default=False)],
    file: Annotated[Path, typer.Argument(metavar="FILE", help="The archive.", exists=True,
                                         dir_okay=False, show_default=False)],
    target: Annotated[str | None, typer.Option("--target", help="Restore: the bank to create "
                                               "(default: the archive's own).")] = None,
    merge: Annotated[bool, typer.Option("--merge", help="Merge the archive's documents into "
                                        "BANK instead of restoring a new bank.")] = False,
    conflict: Annotated[str | None, typer.Option("--conflict", help="Merge: skip, replace or "
                                                 "new-id for a document already there.")] = None,
    no_data: NoData = False, no_config: NoConfig = False, history: History = False,
    wait: WaitOpt = False, output: OutputOpt = None,
) -> None:
    """Import an archive: restore it as a new bank, or merge its documents into BANK."""
    params: dict[str, Any] = {"mode": "merge" if merge else "restore",
                              "target_bank_id": target, "document_conflict": conflict}
    if not merge:
        params.update(_scope(no_data, no_config, history))
    with _settings(ctx).api() as api, file.open("rb") as archive:
        result = api.bank_import(bank, archive, **params)
    _submitted(ctx, output, bank, wait, result, f"Import of {file}")


@bank_app.command("clone")
def bank_clone(
    ctx: typer.Context, bank: Bank,
    target: Annotated[str, typer.Argument(metavar="TARGET", help="The bank to create.",
                                          show_default=False)],
    no_data: NoData = False, no_config: NoConfig = False, history: History = False,
    wait: WaitOpt = False, output: OutputOpt = None,
) -> None:
    """Copy a bank into a new one."""
    with _settings(ctx).api() as api:
        result = api.bank_clone(bank, target_bank_id=target, **_scope(no_data, no_config, history))
    _submitted(ctx, output, bank, wait, result, f"Clone of {bank} into {target}")
