#!/usr/bin/env python
"""Django's command-line utility, pointed at a running ``make run`` when no database URL is set."""

from __future__ import annotations

import os
import secrets
import sys

from django.core.management import execute_from_command_line

from hindsight.devstack.state import DevstackNotRunning, devstack_environment

# Commands that never open a database connection: they run without servers (the Docker build's
# collectstatic, `make check`'s makemigrations --check, help).
NO_DATABASE_COMMANDS = frozenset({
    "help", "version", "--help", "-h", "--version", "makemigrations", "collectstatic",
    "findstatic", "diffsettings", "spectacular", "startapp", "startproject",
})


def main(argv: list[str]) -> int:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "hindsight.project.settings")
    command = argv[1] if len(argv) > 1 else "help"
    try:
        os.environ.update(
            devstack_environment(os.environ, needs_database=command not in NO_DATABASE_COMMANDS)
        )
    except DevstackNotRunning as exc:
        print(f"manage.py {command}: {exc}", file=sys.stderr)
        return 2
    if command in NO_DATABASE_COMMANDS and not os.environ.get("HINDSIGHT_API_SECRET_KEY"):
        # They sign nothing (no session, no token), so the hindsight.E200 check that a serving
        # process must pass has nothing to protect here; a throw-away key lets them run.
        os.environ["HINDSIGHT_API_SECRET_KEY"] = "unused-" + secrets.token_urlsafe(16)
    execute_from_command_line(argv)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
