"""Bank templates through the official hindsight-client 1.1.0 (``BankTemplatesApi``) against a
live server: a manifest upstream 1.1.0 wrote imports here, a manifest written here passes
upstream's own schema of it, and export → import into a new bank → export gives back the same
manifest (here → here), with a dry run first."""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from hindsight_client import Hindsight
from hindsight_client.hindsight_client import _run_async
from hindsight_client_api.api.bank_templates_api import BankTemplatesApi
from hindsight_client_api.models import BankTemplateManifest

from hindsight.banks.models import Bank
from hindsight.banks.services import bank_config_update
from mentalmodels.directives.models import Directive
from mentalmodels.directives.services import directive_create
from mentalmodels.knowledge.services import knowledge_page_create
from mentalmodels.models import MentalModel
from operations.models import Operation
from tests.factories import make_bank, make_mental_model

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.integration]

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
# Written by upstream 1.1.0 itself: python -m bench.upstream_bank_template (tests/fixtures/README).
UPSTREAM_MANIFEST = FIXTURES / "upstream-1.1.0-bank-template.json"
UPSTREAM_SCHEMA = FIXTURES / "upstream-1.1.0-bank-template-schema.json"


@pytest.fixture
def client(live_server: Any) -> Iterator[Hindsight]:
    hindsight = Hindsight(base_url=live_server.url, timeout=30.0, max_attempts=1)
    yield hindsight
    hindsight.close()


@pytest.fixture
def templates(client: Hindsight) -> BankTemplatesApi:
    return BankTemplatesApi(client._api_client)


def run(call: Any) -> Any:
    return _run_async(call)


def build_bank(bank_id: str) -> None:
    make_bank(bank_id)
    bank_config_update(bank_id=bank_id, updates={
        "reflect_mission": "Answer about the team.", "disposition_skepticism": 2,
        "retain_extraction_mode": "custom", "retain_custom_instructions": "Keep names.",
        # As the client's models write them (every key of upstream's shape, defaults filled).
        "entity_labels": [{"key": "team", "description": "", "type": "value", "optional": True,
                           "tag": False, "values": [{"value": "platform", "description": ""}],
                           "fields": {}}],
        "default_observation_scopes": [["team"]], "recall_budget_adaptive_low": 0.25,
        "llm_token_budget_per_day": 50_000})
    make_mental_model(bank_id, "team-stack", name="Team stack", tags=["team", "stack"],
                      source_query="What stack does the team use?", max_tokens=1024,
                      trigger={"refresh_cron": "0 3 * * *", "mode": "delta",
                               "tags_match": "any", "fact_types": ["world"],
                               "tag_groups": [{"tags": ["team"], "match": "any", "resolve": "exact"}],
                               "response_schema": {"type": "object", "properties": {
                                   "languages": {"type": "array", "items": {"type": "string"}}}}})
    make_mental_model(bank_id, "people", name="People", source_query="Who leads what?",
                      trigger={"refresh_after_consolidation": True, "keep_trace": True})
    knowledge_page_create(bank_id=bank_id, name="Onboarding", source_query="How to start?")
    directive_create(bank_id=bank_id, name="Formal", content="Answer in formal English.",
                     priority=5)
    directive_create(bank_id=bank_id, name="Scoped", content="Name no customer.",
                     tags=["team"], is_active=False)


def raw_export(client: Hindsight, bank_id: str) -> dict[str, Any]:
    """The export as sent (the client's model would drop its nulls)."""
    url = f"{client._base_url}/v1/default/banks/{bank_id}/export"
    with urllib.request.urlopen(url, timeout=30) as response:
        return dict(json.loads(response.read()))


def test_a_manifest_upstream_wrote_imports_here(client: Hindsight,
                                                templates: BankTemplatesApi) -> None:
    written = json.loads(UPSTREAM_MANIFEST.read_text())
    manifest = BankTemplateManifest.from_dict(written)
    dry = run(templates.import_bank_template("from-upstream", manifest, dry_run=True))
    assert dry.dry_run is True and sorted(dry.mental_models_created) == ["people", "team-stack"]
    assert not Bank.objects.filter(id="from-upstream").exists()

    result = run(templates.import_bank_template("from-upstream", manifest))
    assert result.config_applied is True and result.dry_run is False
    assert sorted(result.mental_models_created) == ["people", "team-stack"]
    assert result.directives_created == ["Formal", "No customers"]
    assert len(result.operation_ids) == 2
    assert Operation.objects.filter(bank_id="from-upstream").count() == 2
    assert Bank.objects.get(id="from-upstream").config == {
        key: value for key, value in written["bank"].items() if value is not None}
    inactive = Directive.objects.get(bank_id="from-upstream", name="No customers")
    assert (inactive.is_active, inactive.tags) == (False, ["team"])

    # Read back here, it is upstream's manifest (keys of ours aside).
    ours = raw_export(client, "from-upstream")
    assert ours["version"] == written["version"]
    assert {k: ours["bank"][k] for k in written["bank"]} == written["bank"]
    assert ours["directives"] == written["directives"]
    for mine, theirs in zip(ours["mental_models"], written["mental_models"], strict=True):
        assert {k: v for k, v in mine.items() if k != "trigger"} == \
            {k: v for k, v in theirs.items() if k != "trigger"}
        assert {k: mine["trigger"][k] for k in theirs["trigger"]} == theirs["trigger"]


def test_a_manifest_written_here_passes_upstreams_schema(client: Hindsight) -> None:
    build_bank("tpl-rich")
    manifest = raw_export(client, "tpl-rich")
    assert manifest["bank"]["llm_token_budget_per_day"] == 50_000  # ours: upstream ignores it
    jsonschema.validate(manifest, json.loads(UPSTREAM_SCHEMA.read_text()))


def test_export_import_export_through_the_client_gives_back_the_same_manifest(
        client: Hindsight, templates: BankTemplatesApi) -> None:
    build_bank("tpl-origin")
    exported = run(templates.export_bank_template("tpl-origin"))
    assert isinstance(exported, BankTemplateManifest)
    assert [m.id for m in exported.mental_models] == ["people", "team-stack"]

    dry = run(templates.import_bank_template("tpl-copy", exported, dry_run=True))
    assert dry.dry_run and dry.directives_created == ["Formal", "Scoped"]
    result = run(templates.import_bank_template("tpl-copy", exported))
    assert result.mental_models_created == ["people", "team-stack"]
    assert result.directives_created == ["Formal", "Scoped"]

    copy, origin = raw_export(client, "tpl-copy"), raw_export(client, "tpl-origin")
    # Our own key travels in the raw manifest; the client's model has no field for it.
    origin["bank"]["llm_token_budget_per_day"] = None
    for key in origin:
        assert copy[key] == origin[key], key
    stack = MentalModel.objects.get(bank_id="tpl-copy", mental_model_id="team-stack")
    assert stack.tags == ["team", "stack"] and stack.content == ""

    again = run(templates.import_bank_template("tpl-copy", exported))
    assert again.mental_models_created == again.mental_models_updated == []
    assert again.directives_created == again.directives_updated == []
    assert again.operation_ids == []

    schema = run(templates.get_bank_template_schema())
    assert schema["title"] == "BankTemplateManifest"
    jsonschema.validate(origin, schema)
