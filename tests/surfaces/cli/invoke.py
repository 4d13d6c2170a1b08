"""The ``hindsight`` CLI run in-process against a live server, for the tests of its command
groups (knowledge base, directives): each call checks its exit code and returns the result."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from typer.testing import CliRunner

from hindsight.surfaces.cli.app import app


def cli_against(url: str) -> Callable[..., Any]:
    runner = CliRunner()

    def run(*args: str, code: int = 0) -> Any:
        result = runner.invoke(app, ["--api-url", url, *args])
        assert result.exit_code == code, (result.exit_code, result.output)
        return result

    return run


def as_json(result: Any) -> Any:
    return json.loads(result.stdout)
