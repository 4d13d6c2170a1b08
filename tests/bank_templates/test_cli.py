"""``hindsight bank template export|import|schema`` against a live server: a bank's manifest
written to a file, applied to another bank (a dry run first), the schema, and a bad manifest
refused on one line with exit 1."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from hindsight.banks.models import Bank
from mentalmodels.directives.models import Directive
from mentalmodels.directives.services import directive_create
from mentalmodels.models import MentalModel
from tests.factories import make_bank, make_mental_model
from tests.surfaces.cli.invoke import as_json, cli_against

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.integration]


@pytest.fixture
def cli(live_server: Any) -> Any:
    return cli_against(live_server.url)


def test_a_template_exported_to_a_file_is_imported_into_another_bank(cli: Any,
                                                                     tmp_path: Path) -> None:
    make_bank("cli-tpl")
    make_mental_model("cli-tpl", "team", name="Team", source_query="Who is in the team?")
    directive_create(bank_id="cli-tpl", name="Formal", content="Answer formally.")
    manifest = tmp_path / "team.json"
    cli("bank", "template", "export", "cli-tpl", "--file", str(manifest))
    assert json.loads(manifest.read_text())["directives"][0]["name"] == "Formal"

    dry = as_json(cli("bank", "template", "import", "cli-copy", str(manifest), "--dry-run",
                      "-o", "json"))
    assert dry["dry_run"] is True and dry["mental_models_created"] == ["team"]
    assert not Bank.objects.filter(id="cli-copy").exists()

    shown = cli("bank", "template", "import", "cli-copy", str(manifest), "-o", "table")
    assert "Template import into cli-copy" in shown.stdout and "team" in shown.stdout
    assert MentalModel.objects.filter(bank_id="cli-copy", mental_model_id="team").exists()
    assert Directive.objects.filter(bank_id="cli-copy", name="Formal").exists()
    again = as_json(cli("bank", "template", "import", "cli-copy", str(manifest), "-o", "json"))
    assert again["mental_models_unchanged"] == ["team"]
    assert again["directives_unchanged"] == ["Formal"]

    schema = as_json(cli("bank", "template", "schema"))
    assert schema["title"] == "BankTemplateManifest" and schema["required"] == ["version"]


def test_a_refused_manifest_is_one_line_and_exit_code_1(cli: Any, tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"version": "2"}))
    # In-process the refusal comes out as the ApiError the console script prints on one line.
    ran = cli("bank", "template", "import", "cli-bad", str(bad), code=1)
    assert str(ran.exception) == ("HTTP 422: body.version: version '2' is not supported by "
                                  "this server (it reads up to '1')")
    assert not Bank.objects.filter(id="cli-bad").exists()
    (tmp_path / "nojson.json").write_text("{")
    ran = cli("bank", "template", "import", "cli-bad", str(tmp_path / "nojson.json"), code=2)
    assert "is not JSON" in " ".join(ran.output.replace("│", " ").split())
