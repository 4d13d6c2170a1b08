"""The ``hindsight`` command line: mental models, operations, banks and the MCP server.

Wiring only: each command parses its arguments, makes the REST call(s) through ``HindsightApi``
and renders the answer (``render``). The seed's commands and flags are kept as written::

    hindsight mental-model create BANK NAME QUERY [--id ID] [--tags a,b] [--tags-match any]
    hindsight mental-model update BANK ID [--name N] [--trigger-mode delta]
                                          [--trigger-keep-trace true|false]
    hindsight mental-model delete BANK ID -y

Exit codes: 0 success; 1 the server refused the call (its message printed on one line), the
API could not be reached, or a ``--wait`` ended on a failed/cancelled operation; 2 bad usage.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import Annotated, Any

import typer

from hindsight.infra.config import read_config  # the one env reader (no Django needed)
from hindsight.infra.vocabulary import OperationStatus, RefreshMode, TagsMatch
from hindsight.surfaces.cli import render
from hindsight.surfaces.cli.api import DEFAULT_URL, FINAL_STATUSES, ApiError, HindsightApi


class Output(StrEnum):
    table = "table"
    json = "json"


@dataclass
class Settings:
    api_url: str
    api_key: str | None
    output: Output | None
    poll_interval: float = 0.5

    def api(self) -> HindsightApi:
        return HindsightApi(self.api_url, api_key=self.api_key)

    def output_for(self, override: Output | None) -> Output:
        chosen = override or self.output
        if chosen is not None:
            return chosen
        return Output.table if sys.stdout.isatty() else Output.json


app = typer.Typer(
    name="hindsight",
    help="Drive a Hindsight mental-models server over its HTTP API.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
mental_model_app = typer.Typer(help="Mental models: create, read, refresh, history, …",
                               no_args_is_help=True)
operation_app = typer.Typer(help="Async operations (refreshes, async retains).",
                            no_args_is_help=True)
bank_app = typer.Typer(help="Memory banks.", no_args_is_help=True)
app.add_typer(mental_model_app, name="mental-model")
app.add_typer(operation_app, name="operation")
app.add_typer(bank_app, name="bank")

OutputOpt = Annotated[
    Output | None,
    typer.Option("--output", "-o", help="table (default on a terminal) or json (when piped)."),
]
WaitOpt = Annotated[
    bool, typer.Option("--wait", help="Follow the operation until it ends; exit 1 if it failed.")
]
Bank = Annotated[str, typer.Argument(metavar="BANK", help="Memory bank id.", show_default=False)]
ModelId = Annotated[
    str, typer.Argument(metavar="MENTAL_MODEL_ID", help="Mental model id.", show_default=False)
]
OpId = Annotated[
    str, typer.Argument(metavar="OPERATION_ID", help="Operation id.", show_default=False)
]


@app.callback()
def root(
    ctx: typer.Context,
    api_url: Annotated[
        str, typer.Option("--api-url", envvar="HINDSIGHT_URL", help="The API's base URL.")
    ] = DEFAULT_URL,
    api_key: Annotated[
        str | None,
        typer.Option("--api-key", envvar="HINDSIGHT_API_KEY",
                     help="Tenant API key (sent as Authorization: Bearer).", show_default=False),
    ] = None,
    output: OutputOpt = None,
) -> None:
    ctx.obj = Settings(api_url=api_url, api_key=api_key or None, output=output)



def _show(settings: Settings, output: Output | None, body: Any,
          table: Callable[[Any], None]) -> None:
    """JSON when asked for (or piped), else the command's table."""
    if settings.output_for(output) is Output.json:
        render.emit_json(body)
    else:
        table(body)

def _answer(settings: Settings, output: Output | None, result: Any, text: str) -> None:
    """The server's answer as JSON, or one line saying what was done."""
    if settings.output_for(output) is Output.json:
        render.emit_json(result)
    else:
        render.message(text)


def _settings(ctx: typer.Context) -> Settings:
    settings = ctx.find_object(Settings)
    assert settings is not None
    return settings


def _tags(value: str | None) -> list[str] | None:
    if value is None:
        return None
    return [t.strip() for t in value.split(",") if t.strip()]


def _true_false(value: str | None, option: str) -> bool | None:
    if value is None:
        return None
    lowered = value.strip().lower()
    if lowered in ("true", "yes", "1", "on"):
        return True
    if lowered in ("false", "no", "0", "off"):
        return False
    raise typer.BadParameter(f"{value!r} is not true or false", param_hint=option)


def _wait(settings: Settings, api: HindsightApi, bank: str, operation_id: str) -> dict[str, Any]:
    """Poll the operation until a final status, with a live status line on stderr."""
    started = time.monotonic()
    with render.err.status(f"operation {operation_id}: submitted") as status:
        while True:
            op: dict[str, Any] = api.operation_get(bank, operation_id)
            state = str(op.get("status"))
            elapsed = time.monotonic() - started
            note = f" (retry {op['retry_count']})" if op.get("retry_count") else ""
            status.update(f"operation {operation_id}: {state}{note}  {elapsed:.1f}s")
            if state in FINAL_STATUSES:
                return op
            time.sleep(settings.poll_interval)


def _finish_wait(op: dict[str, Any], output: Output, result: dict[str, Any]) -> None:
    state = op.get("status")
    if output is Output.json:
        render.emit_json({**result, "operation": op})
    # Beside the JSON too (on stderr, as the live status line was): how it ended, in words.
    render.operation_ended(op, str(result.get("operation_id")), to_stderr=output is Output.json)
    if state != "completed":
        raise typer.Exit(1)


def _create_and_follow(
    settings: Settings, output: Output | None, bank: str, wait: bool, *,
    submit: Callable[[HindsightApi], dict[str, Any]],
    created: Callable[[dict[str, Any]], str],
    queued: Callable[[dict[str, Any]], str],
) -> None:
    """Create something whose first refresh is an operation; ``--wait`` follows it."""
    mode = settings.output_for(output)
    with settings.api() as api:
        result = submit(api)
        if wait:
            if mode is Output.table:
                render.message(created(result))
            _finish_wait(_wait(settings, api, bank, result["operation_id"]), mode, result)
            return
    if mode is Output.json:
        render.emit_json(result)
    else:
        render.message(f"{created(result)} {queued(result)}")


# ---------------------------------------------------------------------------------------------
# mental-model


@mental_model_app.command("create")
def mm_create(
    ctx: typer.Context,
    bank: Bank,
    name: Annotated[
        str, typer.Argument(metavar="NAME", help="Human-readable name.", show_default=False)
    ],
    source_query: Annotated[
        str, typer.Argument(metavar="QUERY", help="The question it answers.", show_default=False)
    ],
    id: Annotated[str | None, typer.Option("--id", help="Custom id (a-z, 0-9, -).")] = None,
    tags: Annotated[str | None, typer.Option("--tags", help="Comma-separated tags.")] = None,
    tags_match: Annotated[
        TagsMatch | None, typer.Option("--tags-match", help="How the tags filter on refresh.")
    ] = None,
    max_tokens: Annotated[int | None, typer.Option("--max-tokens")] = None,
    refresh_after_consolidation: Annotated[
        str | None, typer.Option("--refresh-after-consolidation", metavar="true|false")
    ] = None,
    refresh_cron: Annotated[
        str | None, typer.Option("--refresh-cron", help="5-field UTC cron.")
    ] = None,
    wait: WaitOpt = False,
    output: OutputOpt = None,
) -> None:
    """Create a mental model; its first refresh runs in the background."""
    settings = _settings(ctx)
    trigger: dict[str, Any] = {}
    if tags_match is not None:
        trigger["tags_match"] = tags_match.value
    rac = _true_false(refresh_after_consolidation, "--refresh-after-consolidation")
    if rac is not None:
        trigger["refresh_after_consolidation"] = rac
    if refresh_cron is not None:
        trigger["refresh_cron"] = refresh_cron
    body: dict[str, Any] = {"name": name, "source_query": source_query}
    if id is not None:
        body["id"] = id
    if tags is not None:
        body["tags"] = _tags(tags)
    if max_tokens is not None:
        body["max_tokens"] = max_tokens
    if trigger:
        body["trigger"] = trigger
    _create_and_follow(
        settings, output, bank, wait,
        submit=lambda api: api.mental_model_create(bank, body),
        created=lambda result: f"Created mental model {result['mental_model_id']}",
        queued=lambda result: f"(refresh operation {result['operation_id']})",
    )


@mental_model_app.command("list")
def mm_list(
    ctx: typer.Context,
    bank: Bank,
    tags: Annotated[str | None, typer.Option("--tags", help="Comma-separated tags.")] = None,
    tags_match: Annotated[
        str | None, typer.Option("--tags-match", help="any, all or exact.")
    ] = None,
    limit: Annotated[int | None, typer.Option("--limit")] = None,
    offset: Annotated[int | None, typer.Option("--offset")] = None,
    output: OutputOpt = None,
) -> None:
    """List the bank's mental models (metadata, with is_stale)."""
    settings = _settings(ctx)
    with settings.api() as api:
        body = api.mental_model_list(bank, tags=_tags(tags), tags_match=tags_match,
                                     limit=limit, offset=offset)
    _show(settings, output, body, render.mental_model_list)


@mental_model_app.command("get")
def mm_get(ctx: typer.Context, bank: Bank, mental_model_id: ModelId,
           output: OutputOpt = None) -> None:
    """Show one mental model with its content."""
    settings = _settings(ctx)
    with settings.api() as api:
        model = api.mental_model_get(bank, mental_model_id)
    _show(settings, output, model, render.mental_model)


@mental_model_app.command("update")
def mm_update(
    ctx: typer.Context,
    bank: Bank,
    mental_model_id: ModelId,
    name: Annotated[str | None, typer.Option("--name")] = None,
    source_query: Annotated[str | None, typer.Option("--source-query")] = None,
    tags: Annotated[str | None, typer.Option("--tags", help="Comma-separated tags.")] = None,
    max_tokens: Annotated[int | None, typer.Option("--max-tokens")] = None,
    trigger_mode: Annotated[RefreshMode | None, typer.Option("--trigger-mode")] = None,
    trigger_keep_trace: Annotated[
        str | None, typer.Option("--trigger-keep-trace", metavar="true|false")
    ] = None,
    trigger_refresh_after_consolidation: Annotated[
        str | None, typer.Option("--trigger-refresh-after-consolidation", metavar="true|false")
    ] = None,
    trigger_refresh_cron: Annotated[str | None, typer.Option("--trigger-refresh-cron")] = None,
    trigger_tags_match: Annotated[TagsMatch | None, typer.Option("--trigger-tags-match")] = None,
    trigger_review: Annotated[str | None, typer.Option(
        "--trigger-review", metavar="true|false",
        help="Hold each refresh's change as a proposal to approve.")] = None,
    output: OutputOpt = None,
) -> None:
    """Change a mental model (only the options given); trigger keys merge one by one."""
    settings = _settings(ctx)
    trigger: dict[str, Any] = {}
    if trigger_mode is not None:
        trigger["mode"] = trigger_mode.value
    keep = _true_false(trigger_keep_trace, "--trigger-keep-trace")
    if keep is not None:
        trigger["keep_trace"] = keep
    rac = _true_false(trigger_refresh_after_consolidation, "--trigger-refresh-after-consolidation")
    if rac is not None:
        trigger["refresh_after_consolidation"] = rac
    if trigger_refresh_cron is not None:
        trigger["refresh_cron"] = trigger_refresh_cron
    if trigger_tags_match is not None:
        trigger["tags_match"] = trigger_tags_match.value
    review = _true_false(trigger_review, "--trigger-review")
    if review is not None:
        trigger["review"] = review
    body: dict[str, Any] = {}
    if name is not None:
        body["name"] = name
    if source_query is not None:
        body["source_query"] = source_query
    if tags is not None:
        body["tags"] = _tags(tags)
    if max_tokens is not None:
        body["max_tokens"] = max_tokens
    if trigger:
        body["trigger"] = trigger
    if not body:
        raise typer.BadParameter("nothing to change: give at least one option")
    with settings.api() as api:
        model = api.mental_model_update(bank, mental_model_id, body)
    _show(settings, output, model, render.mental_model)


@mental_model_app.command("delete")
def mm_delete(
    ctx: typer.Context,
    bank: Bank,
    mental_model_id: ModelId,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")] = False,
    output: OutputOpt = None,
) -> None:
    """Delete a mental model and its history (asks first unless -y)."""
    settings = _settings(ctx)
    if not yes:
        typer.confirm(f"Delete mental model {mental_model_id!r} from bank {bank!r}?",
                      abort=True, err=True)
    with settings.api() as api:
        result = api.mental_model_delete(bank, mental_model_id)
    if settings.output_for(output) is Output.json:
        render.emit_json(result)
    else:
        render.message(f"Deleted mental model {mental_model_id}")


@mental_model_app.command("refresh")
def mm_refresh(ctx: typer.Context, bank: Bank, mental_model_id: ModelId, wait: WaitOpt = False,
               output: OutputOpt = None) -> None:
    """Refresh now (releases a parked automatic refresh); --wait follows it."""
    settings = _settings(ctx)
    mode = settings.output_for(output)
    with settings.api() as api:
        result = api.mental_model_refresh(bank, mental_model_id)
        if wait:
            _finish_wait(_wait(settings, api, bank, result["operation_id"]), mode, result)
            return
    if mode is Output.json:
        render.emit_json(result)
    else:
        render.message(f"Refresh queued: operation {result['operation_id']}")


@mental_model_app.command("clear")
def mm_clear(ctx: typer.Context, bank: Bank, mental_model_id: ModelId,
             output: OutputOpt = None) -> None:
    """Empty the content (kept in history) so the next refresh rebuilds it in full."""
    settings = _settings(ctx)
    with settings.api() as api:
        model = api.mental_model_clear(bank, mental_model_id)
    if settings.output_for(output) is Output.json:
        render.emit_json(model)
    else:
        render.message(f"Cleared mental model {mental_model_id}")


@mental_model_app.command("history")
def mm_history(ctx: typer.Context, bank: Bank, mental_model_id: ModelId,
               output: OutputOpt = None) -> None:
    """The change log, newest first: each version as a coloured diff, failures in red."""
    settings = _settings(ctx)
    mode = settings.output_for(output)
    with settings.api() as api:
        entries = api.mental_model_history(bank, mental_model_id)
        if mode is Output.json:
            render.emit_json(entries)
            return
        current = api.mental_model_get(bank, mental_model_id, detail="content").get("content")
    render.history(entries, current)


@mental_model_app.command("dry-run-refresh")
def mm_dry_run(ctx: typer.Context, bank: Bank, mental_model_id: ModelId,
               output: OutputOpt = None) -> None:
    """Preview a refresh (runs the real pipeline, writes nothing); shows the diff."""
    settings = _settings(ctx)
    with settings.api() as api:
        preview = api.mental_model_dry_run(bank, mental_model_id)
    _show(settings, output, preview, render.dry_run)


# ---------------------------------------------------------------------------------------------
# operation


@operation_app.command("get")
def op_get(ctx: typer.Context, bank: Bank, operation_id: OpId, wait: WaitOpt = False,
           output: OutputOpt = None) -> None:
    """Show an operation; --wait follows it to its end."""
    settings = _settings(ctx)
    mode = settings.output_for(output)
    with settings.api() as api:
        if wait:
            op = _wait(settings, api, bank, operation_id)
            if mode is Output.json:
                render.emit_json(op)
            else:
                render.operation(op)
            if op.get("status") != "completed":
                raise typer.Exit(1)
            return
        op = api.operation_get(bank, operation_id)
    if op.get("status") == "not_found":
        raise ApiError(404, f"operation {operation_id} not found in bank {bank!r}")
    if mode is Output.json:
        render.emit_json(op)
    else:
        render.operation(op)


@operation_app.command("list")
def op_list(
    ctx: typer.Context,
    bank: Bank,
    status: Annotated[OperationStatus | None, typer.Option("--status")] = None,
    type: Annotated[str | None, typer.Option("--type", help="Operation type.")] = None,
    limit: Annotated[int | None, typer.Option("--limit")] = None,
    offset: Annotated[int | None, typer.Option("--offset")] = None,
    output: OutputOpt = None,
) -> None:
    """List the bank's operations, newest first."""
    settings = _settings(ctx)
    with settings.api() as api:
        body = api.operation_list(bank, status=status.value if status else None, type=type,
                                  limit=limit, offset=offset)
    _show(settings, output, body, render.operation_list)


@operation_app.command("cancel")
def op_cancel(ctx: typer.Context, bank: Bank, operation_id: OpId,
              output: OutputOpt = None) -> None:
    """Cancel a pending operation."""
    settings = _settings(ctx)
    with settings.api() as api:
        result = api.operation_cancel(bank, operation_id)
    if settings.output_for(output) is Output.json:
        render.emit_json(result)
    else:
        render.message(result.get("message") or f"Cancelled {operation_id}")


@operation_app.command("retry")
def op_retry(ctx: typer.Context, bank: Bank, operation_id: OpId, wait: WaitOpt = False,
             output: OutputOpt = None) -> None:
    """Retry a failed/cancelled operation, or release a parked one now."""
    settings = _settings(ctx)
    mode = settings.output_for(output)
    with settings.api() as api:
        result = api.operation_retry(bank, operation_id)
        if wait:
            target = result.get("operation_id") or operation_id
            _finish_wait(_wait(settings, api, bank, target), mode, result)
            return
    if mode is Output.json:
        render.emit_json(result)
    else:
        render.message(result.get("message") or f"Retried {operation_id}")


# ---------------------------------------------------------------------------------------------
# bank


@bank_app.command("list")
def bank_list(ctx: typer.Context, output: OutputOpt = None) -> None:
    """List memory banks."""
    settings = _settings(ctx)
    with settings.api() as api:
        body = api.bank_list()
    _show(settings, output, body, render.bank_list)


@bank_app.command("stats")
def bank_stats(ctx: typer.Context, bank: Bank, output: OutputOpt = None) -> None:
    """A bank's counts and last write time."""
    settings = _settings(ctx)
    with settings.api() as api:
        stats = api.bank_stats(bank)
    _show(settings, output, stats, render.bank_stats)


# ---------------------------------------------------------------------------------------------
# mcp


@app.command("mcp")
def mcp(
    ctx: typer.Context,
    bank: Annotated[
        str | None,
        typer.Option("--bank", help="The one bank the tools work on: no tool takes bank_id "
                                    "(upstream's /mcp/{bank}/); without it each call names one."),
    ] = None,
) -> None:
    """Serve the MCP tools over stdio (for desktop agents); they call --api-url."""
    # The MCP SDK loads only for this command: every other command stays quick to start.
    from hindsight.surfaces.mcp_server.stdio import run_stdio  # noqa: PLC0415

    settings = _settings(ctx)
    cfg = read_config()
    tool_errors = [p.message for p in cfg.errors if p.variable == "HINDSIGHT_API_MCP_ENABLED_TOOLS"]
    if tool_errors:
        raise ApiError(0, f"HINDSIGHT_API_MCP_ENABLED_TOOLS: {tool_errors[0]}")
    run_stdio(api=settings.api(), bank_id=bank, enabled=cfg.mcp_enabled_tools)


def main() -> None:
    """Console-script entry point: no traceback, one line per error, exit 1."""
    try:
        app()
    except ApiError as exc:
        render.err.print(f"Error: {exc}", markup=False, highlight=False, soft_wrap=True)
        sys.exit(1)
    except KeyboardInterrupt:
        sys.exit(130)
    except Exception as exc:  # a bug: still one line, never a traceback
        detail = " ".join(str(exc).split()) or type(exc).__name__
        render.err.print(f"Error: unexpected {type(exc).__name__}: {detail}", markup=False,
                         soft_wrap=True)
        if os.environ.get("HINDSIGHT_CLI_DEBUG"):
            raise
        sys.exit(1)


__all__ = ["app", "main"]
