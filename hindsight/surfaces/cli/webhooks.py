"""``hindsight webhook …``: a bank's webhooks and their deliveries over the HTTP API (wiring
only, as ``app``)::

    hindsight webhook list BANK
    hindsight webhook create BANK URL [--events a,b] [--secret S] [--disabled]
                                      [--method GET|POST] [--timeout N] [--header K=V]...
    hindsight webhook update BANK WEBHOOK_ID [--url U] [--events a,b] [--secret S]
                                             [--clear-secret] [--enabled true|false]
    hindsight webhook deliveries BANK WEBHOOK_ID [--limit N] [--cursor C]
    hindsight webhook delete BANK WEBHOOK_ID -y

Registered on the ``hindsight`` app by ``hindsight.surfaces.cli`` (``__init__``).
"""

from __future__ import annotations

from typing import Annotated, Any

import typer

from hindsight.infra.vocabulary import WEBHOOK_EVENTS
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

webhook_app = typer.Typer(help="Webhooks: a bank's events sent to a URL of yours, signed.",
                          no_args_is_help=True)

WebhookId = Annotated[str, typer.Argument(metavar="WEBHOOK_ID", show_default=False)]
EventsOpt = Annotated[str | None, typer.Option(
    "--events", help="Comma-separated: " + ", ".join(WEBHOOK_EVENTS))]


def _webhooks(body: dict[str, Any]) -> None:
    items = body["items"]
    if not items:
        render.message("no webhooks")
        return
    render.out.print(render.list_table(
        f"Webhooks ({body['total']})",
        [("id", [h["id"] for h in items]),
         ("url", [h["url"] for h in items]),
         ("events", [", ".join(h["event_types"]) for h in items]),
         ("enabled", ["yes" if h["enabled"] else "no" for h in items]),
         ("failures", [str(h.get("consecutive_failures", 0)) for h in items]),
         ("disabled because", [h.get("disabled_reason") or "" for h in items])],
        keep_first=["url", "events", "enabled"],
    ))


def _deliveries(body: dict[str, Any]) -> None:
    items = body["items"]
    if not items:
        render.message("no deliveries")
        return
    render.out.print(render.list_table(
        "Deliveries (newest first)",
        [("id", [d["id"] for d in items]),
         ("event", [d["event_type"] for d in items]),
         ("status", [d["status"] for d in items]),
         ("attempts", [str(d["attempts"]) for d in items]),
         ("last answer", [str(d["last_response_status"] or "") for d in items]),
         ("last error", [d["last_error"] or "" for d in items]),
         ("next retry", [d["next_retry_at"] or "" for d in items]),
         ("created", [d["created_at"] for d in items])],
        keep_first=["event", "status", "attempts", "last answer"],
    ))
    if body.get("next_cursor"):
        render.message(f"more: --cursor {body['next_cursor']}")


def _headers(values: list[str] | None) -> dict[str, str]:
    headers = {}
    for value in values or []:
        name, sep, content = value.partition("=")
        if not sep or not name.strip():
            raise typer.BadParameter(f"{value!r} is not NAME=VALUE", param_hint="--header")
        headers[name.strip()] = content
    return headers


@webhook_app.command("list")
def webhook_list(ctx: typer.Context, bank: Bank, output: OutputOpt = None) -> None:
    """The bank's webhooks, oldest first (the secret is never shown)."""
    settings = _settings(ctx)
    with settings.api() as api:
        body = api.webhook_list(bank)
    _show(settings, output, body, _webhooks)


@webhook_app.command("create")
def webhook_create(
    ctx: typer.Context, bank: Bank,
    url: Annotated[str, typer.Argument(metavar="URL", show_default=False)],
    events: EventsOpt = None,
    secret: Annotated[str | None, typer.Option("--secret", help="Signs every delivery.")] = None,
    disabled: Annotated[bool, typer.Option("--disabled", help="Create it switched off.")] = False,
    method: Annotated[str, typer.Option("--method", help="POST or GET")] = "POST",
    timeout: Annotated[int, typer.Option("--timeout", help="Seconds, 1..300")] = 30,
    header: Annotated[list[str] | None, typer.Option("--header", help="NAME=VALUE")] = None,
    output: OutputOpt = None,
) -> None:
    """Register a webhook (events: consolidation.completed unless --events)."""
    settings = _settings(ctx)
    body: dict[str, Any] = {"url": url, "secret": secret, "enabled": not disabled,
                            "http_config": {"method": method, "timeout_seconds": timeout,
                                            "headers": _headers(header), "params": {}}}
    if events is not None:
        body["event_types"] = _tags(events)
    with settings.api() as api:
        created = api.webhook_create(bank, body)
    _answer(settings, output, created, f"Created webhook {created['id']}")


@webhook_app.command("update")
def webhook_update(
    ctx: typer.Context, bank: Bank, webhook_id: WebhookId,
    url: Annotated[str | None, typer.Option("--url")] = None,
    events: EventsOpt = None,
    secret: Annotated[str | None, typer.Option("--secret")] = None,
    clear_secret: Annotated[bool, typer.Option("--clear-secret",
                                               help="Send deliveries unsigned.")] = False,
    enabled: Annotated[str | None, typer.Option("--enabled", help="true or false")] = None,
    output: OutputOpt = None,
) -> None:
    """Change a webhook: each option given replaces that field (--enabled true starts its run
    of failures afresh)."""
    settings = _settings(ctx)
    body: dict[str, Any] = {k: v for k, v in {
        "url": url, "secret": secret, "event_types": _tags(events),
        "enabled": _true_false(enabled, "--enabled")}.items() if v is not None}
    if clear_secret:
        body["secret"] = None
    with settings.api() as api:
        updated = api.webhook_update(bank, webhook_id, body)
    _answer(settings, output, updated, f"Updated webhook {webhook_id}")


@webhook_app.command("deliveries")
def webhook_deliveries(
    ctx: typer.Context, bank: Bank, webhook_id: WebhookId,
    limit: Annotated[int | None, typer.Option("--limit", help="1..200")] = None,
    cursor: Annotated[str | None, typer.Option("--cursor", help="next_cursor of a page")] = None,
    output: OutputOpt = None,
) -> None:
    """A webhook's deliveries, newest first: status, attempts, the last answer, the next retry."""
    settings = _settings(ctx)
    with settings.api() as api:
        body = api.webhook_deliveries(bank, webhook_id, limit=limit, cursor=cursor)
    _show(settings, output, body, _deliveries)


@webhook_app.command("delete")
def webhook_delete(ctx: typer.Context, bank: Bank, webhook_id: WebhookId,
                   yes: Annotated[bool, typer.Option("--yes", "-y",
                                                     help="Do not ask for confirmation.")] = False,
                   output: OutputOpt = None) -> None:
    """Delete a webhook and its deliveries."""
    settings = _settings(ctx)
    if not yes:
        typer.confirm(f"Delete webhook {webhook_id!r} of bank {bank!r}?", abort=True, err=True)
    with settings.api() as api:
        result = api.webhook_delete(bank, webhook_id)
    _answer(settings, output, result, f"Deleted webhook {webhook_id}")
