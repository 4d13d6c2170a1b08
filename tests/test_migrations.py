"""Models and migrations stay in sync (STYLE: `makemigrations --check` runs in CI)."""

from __future__ import annotations

import pytest
from django.core.management import call_command


@pytest.mark.django_db
def test_models_have_no_changes_missing_a_migration() -> None:
    # --check exits non-zero (SystemExit) when a model change has no migration.
    call_command("makemigrations", "--check", "--dry-run", verbosity=0)
