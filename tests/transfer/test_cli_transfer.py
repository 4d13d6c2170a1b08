"""``hindsight bank export|import|clone`` against the live server (real worker): an export
written to a file, restored under another id, a clone, a refusal as one line with exit 1."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hindsight.banks.models import MemoryUnit
from mentalmodels.models import MentalModel
from tests.live import LiveStack
from tests.surfaces.cli.test_cli import hindsight
from tests.transfer.conftest import build_bank

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.integration]


def texts(bank: str) -> list[str]:
    return sorted(MemoryUnit.objects.filter(bank_id=bank).values_list("text", flat=True))


def test_export_import_and_clone_from_the_command_line(live_stack: LiveStack,
                                                       tmp_path: Path) -> None:
    build_bank("cli-source")
    archive = tmp_path / "source.zip"
    ran = hindsight(live_stack, "bank", "export", "cli-source", "--file", str(archive),
                    "-o", "table")
    assert ran.returncode == 0, ran.stderr
    assert f"exported to {archive}" in ran.stdout and archive.stat().st_size > 0

    ran = hindsight(live_stack, "bank", "import", "cli-source", str(archive),
                    "--target", "cli-copy", "--wait", "-o", "json")
    assert ran.returncode == 0, ran.stderr
    assert json.loads(ran.stdout)["operation"]["status"] == "completed"
    assert texts("cli-copy") == texts("cli-source")

    ran = hindsight(live_stack, "bank", "clone", "cli-source", "cli-twin", "--wait")
    assert ran.returncode == 0, ran.stderr
    assert set(MentalModel.objects.filter(bank_id="cli-twin").values_list("name", flat=True)) \
        == set(MentalModel.objects.filter(bank_id="cli-source").values_list("name", flat=True))

    ran = hindsight(live_stack, "bank", "import", "cli-source", str(archive),
                    "--target", "cli-copy")
    assert ran.returncode == 1
    assert "target bank 'cli-copy' already exists" in ran.stderr
    assert live_stack.llm.requests == []
