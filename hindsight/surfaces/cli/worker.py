"""``hindsight worker probe``: the worker's liveness (and readiness) check for Kubernetes, run
in the worker's container; it reads the worker's heartbeat file (``operations.probe``), never the
API, the broker or the database (docs/operating.md, Probes)."""

from __future__ import annotations

from typing import Annotated

import typer

from hindsight.infra.config import read_config
from operations.probe import DEFAULT_MAX_AGE_SECONDS, probe_check, probe_dir

worker_app = typer.Typer(help="A worker on this host.", no_args_is_help=True)


@worker_app.command("probe")
def probe(
    node: Annotated[str | None, typer.Option(
        "--node", help="The worker's node name (name@host, as its -n says); default: the worker "
                       "whose heartbeat is youngest, the one a container runs.")] = None,
    max_age: Annotated[float, typer.Option(
        "--max-age", min=0.1, help="Seconds the last heartbeat may be old.")] = DEFAULT_MAX_AGE_SECONDS,
) -> None:
    """Exit 0 when the worker's event loop beat within --max-age seconds, else 1 (one line
    saying why either way)."""
    result = probe_check(probe_dir(read_config().worker_probe_dir), node=node, max_age=max_age)
    typer.echo(result.message, err=not result.alive)
    raise typer.Exit(0 if result.alive else 1)
