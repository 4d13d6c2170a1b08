"""Bank templates over the API (in process): the export's shape, an import that creates, updates
and leaves alone, the dry run, the schema it is checked against, and every bad manifest a 422
naming the field and the rule that changes nothing."""

from __future__ import annotations

import json
from typing import Any

import jsonschema
import pytest
from rest_framework.test import APIClient

from hindsight.banks.models import Bank
from hindsight.banks.services import bank_config_update
from mentalmodels.directives.models import Directive, DirectiveScopeStamp
from mentalmodels.directives.services import directive_create
from mentalmodels.knowledge.services import knowledge_page_create
from mentalmodels.models import MentalModel
from mentalmodels.services import mental_model_refresh_request, refresh_dedupe_key
from mentalmodels.staleness import stale_flags
from mentalmodels.triggers import TRIGGER_DEFAULTS
from operations.leases import operation_claim
from operations.models import PENDING, PROCESSING, Lease, Operation
from tests.factories import make_bank, make_memory, make_mental_model

pytestmark = pytest.mark.django_db

SOURCE = "tpl-source"
TARGET = "tpl-target"
RESULT_KEYS = ["bank_id", "config_applied", "mental_models_created", "mental_models_updated",
               "directives_created", "directives_updated", "operation_ids", "dry_run",
               "mental_models_unchanged", "directives_unchanged"]


def export(api: APIClient, bank: str) -> Any:
    response = api.get(f"/v1/default/banks/{bank}/export")
    assert response.status_code == 200, response.content
    return response.json()


def apply(api: APIClient, bank: str, manifest: Any, *, dry_run: bool = False,
          status: int = 200) -> Any:
    response = api.post(f"/v1/default/banks/{bank}/import" + ("?dry_run=true" if dry_run else ""),
                        data=json.dumps(manifest), content_type="application/json")
    assert response.status_code == status, response.content
    return response.json()


def model(id_: str = "team-stack", **fields: Any) -> dict[str, Any]:
    return {"id": id_, "name": "Team stack", "source_query": "What stack does the team use?",
            **fields}


def build_source() -> None:
    make_bank(SOURCE)
    bank_config_update(bank_id=SOURCE, updates={"reflect_mission": "Answer about the team.",
                                                "disposition_empathy": 4})
    make_mental_model(SOURCE, "team-stack", name="Team stack", tags=["team"],
                      source_query="What stack does the team use?", content="## Stack\n",
                      trigger={"refresh_cron": "0 3 * * *", "mode": "delta"}, max_tokens=1024)
    make_mental_model(SOURCE, "people", name="People", source_query="Who is who?")
    knowledge_page_create(bank_id=SOURCE, name="Onboarding", source_query="How to start?")
    directive_create(bank_id=SOURCE, name="Formal", content="Answer in formal English.",
                     priority=5)
    directive_create(bank_id=SOURCE, name="Scoped", content="Name no customer.", tags=["team"],
                     is_active=False)


def rows() -> Any:
    """Everything an import may write, by value."""
    return (sorted(Bank.objects.values_list("id", "config")),
            sorted(MentalModel.objects.values_list("bank_id", "mental_model_id", "name",
                                                   "source_query", "tags", "max_tokens",
                                                   "trigger", "updated_at")),
            sorted(Directive.objects.values_list("bank_id", "name", "content", "priority",
                                                 "is_active", "tags", "updated_at")),
            sorted(DirectiveScopeStamp.objects.values_list("bank_id", "tags", "changed_at")),
            Operation.objects.count())


# --- export --------------------------------------------------------------------------------


def test_export_carries_config_models_and_directives_in_upstreams_shape() -> None:
    build_source()
    manifest = export(APIClient(), SOURCE)
    assert list(manifest) == ["version", "bank", "mental_models", "directives"]
    assert manifest["version"] == "1"
    bank = manifest["bank"]
    assert bank["reflect_mission"] == "Answer about the team." and bank["disposition_empathy"] == 4
    assert {k for k, v in bank.items() if v is not None} == {"reflect_mission",
                                                            "disposition_empathy"}
    # The knowledge page stays out; the models carry their configuration, never their content.
    assert [m["id"] for m in manifest["mental_models"]] == ["people", "team-stack"]
    stack = manifest["mental_models"][1]
    assert list(stack) == ["id", "name", "source_query", "tags", "max_tokens", "trigger"]
    assert stack["tags"] == ["team"] and stack["max_tokens"] == 1024
    assert list(stack["trigger"]) == list(TRIGGER_DEFAULTS)
    assert stack["trigger"]["refresh_cron"] == "0 3 * * *" and stack["trigger"]["mode"] == "delta"
    assert manifest["directives"] == [
        {"name": "Formal", "content": "Answer in formal English.", "priority": 5,
         "is_active": True, "tags": []},
        {"name": "Scoped", "content": "Name no customer.", "priority": 0, "is_active": False,
         "tags": ["team"]},
    ]
    jsonschema.validate(manifest, APIClient().get("/v1/bank-template-schema").json())


def test_an_empty_bank_exports_null_sections_and_an_unknown_one_is_404() -> None:
    make_bank("tpl-empty")
    assert export(APIClient(), "tpl-empty") == {"version": "1", "bank": None,
                                                "mental_models": None, "directives": None}
    response = APIClient().get("/v1/default/banks/tpl-nowhere/export")
    assert response.status_code == 404 and "tpl-nowhere" in response.json()["detail"]


# --- import --------------------------------------------------------------------------------


def test_import_into_a_new_bank_creates_it_and_queues_each_new_models_first_refresh() -> None:
    build_source()
    api = APIClient()
    manifest = export(api, SOURCE)
    result = apply(api, TARGET, manifest)
    assert list(result) == RESULT_KEYS
    assert result["bank_id"] == TARGET and result["config_applied"] is True
    assert result["mental_models_created"] == ["people", "team-stack"]
    assert result["directives_created"] == ["Formal", "Scoped"]
    assert result["mental_models_updated"] == result["directives_updated"] == []
    refreshes = Operation.objects.filter(bank_id=TARGET, operation_type="refresh_mental_model")
    assert sorted(result["operation_ids"]) == sorted(str(op.id) for op in refreshes)
    assert len(result["operation_ids"]) == 2
    assert Bank.objects.get(id=TARGET).config == {"reflect_mission": "Answer about the team.",
                                                  "disposition_empathy": 4}
    # The same bank again: what it exports is what was imported.
    assert export(api, TARGET) == manifest


def test_importing_the_same_manifest_again_changes_nothing_and_queues_nothing() -> None:
    build_source()
    api = APIClient()
    manifest = export(api, SOURCE)
    apply(api, TARGET, manifest)
    before = rows()
    result = apply(api, TARGET, manifest)
    assert result["mental_models_unchanged"] == ["people", "team-stack"]
    assert result["directives_unchanged"] == ["Formal", "Scoped"]
    assert result["mental_models_created"] == result["mental_models_updated"] == []
    assert result["directives_created"] == result["directives_updated"] == []
    assert result["operation_ids"] == []
    assert rows()[1:] == before[1:]


def test_a_changed_model_is_updated_as_a_patch_updates_it_without_a_refresh() -> None:
    make_bank(TARGET)
    make_memory(TARGET, "The team writes Python.", tags=["team"])
    make_mental_model(TARGET, "team-stack", name="Team stack", tags=["team"],
                      source_query="What stack does the team use?", content="## Stack\n",
                      fresh=True)
    api = APIClient()
    result = apply(api, TARGET, {"version": "1", "mental_models": [model(
        source_query="Which languages does the team use?",
        trigger={"refresh_after_consolidation": True})]})
    assert result["mental_models_updated"] == ["team-stack"] and result["operation_ids"] == []
    stored = MentalModel.objects.get(bank_id=TARGET, mental_model_id="team-stack")
    assert stored.source_query == "Which languages does the team use?"
    assert stored.trigger["refresh_after_consolidation"] is True
    # Tags left out leave the stored ones (upstream's rule); the content stays, no refresh queued.
    assert stored.tags == ["team"] and stored.content == "## Stack\n"
    assert not Operation.objects.filter(bank_id=TARGET).exists()
    assert stale_flags([stored]) == {stored.uid: False}


def test_a_model_changed_while_its_refresh_runs_fences_that_refresh_and_queues_one_more(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("operations.dispatch.operation_send_on_commit", lambda **kw: True)
    make_bank(TARGET)
    make_mental_model(TARGET, "team-stack", name="Team stack",
                      source_query="What stack does the team use?")
    running = mental_model_refresh_request(bank_id=TARGET, mental_model_id="team-stack")
    assert isinstance(operation_claim(operation_id=running.id, holder="test"), Operation)
    key = refresh_dedupe_key(bank_id=TARGET, mental_model_id="team-stack")
    fence = Lease.objects.get(key=key).fence
    result = apply(APIClient(), TARGET, {"version": "1", "mental_models": [
        model(source_query="Which languages does the team use?")]})
    assert result["mental_models_updated"] == ["team-stack"]
    assert Lease.objects.get(key=key).fence > fence  # the running refresh may no longer write
    assert Operation.objects.get(id=running.id).status == PROCESSING
    assert Operation.objects.filter(dedupe_key=key, status=PENDING).count() == 1


def test_a_directive_is_matched_by_name_and_its_change_makes_its_pages_stale() -> None:
    make_bank(TARGET)
    directive_create(bank_id=TARGET, name="Formal", content="Answer formally.")
    page = make_mental_model(TARGET, "team-stack", fresh=True)
    DirectiveScopeStamp.objects.all().delete()  # written before the page: no change since
    assert stale_flags([page]) == {page.uid: False}
    result = apply(APIClient(), TARGET, {"version": "1", "directives": [
        {"name": "Formal", "content": "Answer in formal English.", "priority": 3}]})
    assert result["directives_updated"] == ["Formal"] and result["config_applied"] is False
    (directive,) = Directive.objects.filter(bank_id=TARGET)
    assert (directive.content, directive.priority) == ("Answer in formal English.", 3)
    page.refresh_from_db()
    assert stale_flags([page]) == {page.uid: True}


def test_config_keys_left_out_or_null_keep_the_banks_overrides() -> None:
    make_bank(TARGET)
    bank_config_update(bank_id=TARGET, updates={"retain_mission": "Keep it.",
                                                "disposition_empathy": 2})
    apply(APIClient(), TARGET, {"version": "1", "bank": {"disposition_empathy": 5,
                                                         "retain_mission": None}})
    assert Bank.objects.get(id=TARGET).config == {"retain_mission": "Keep it.",
                                                  "disposition_empathy": 5}


def test_dry_run_reports_what_an_import_would_do_and_writes_nothing() -> None:
    build_source()
    api = APIClient()
    manifest = export(api, SOURCE)
    make_bank(TARGET)
    make_mental_model(TARGET, "people", name="People", source_query="Who is who?")
    make_mental_model(TARGET, "team-stack", name="Old name", source_query="?")
    directive_create(bank_id=TARGET, name="Formal", content="Answer in formal English.",
                     priority=5)
    before = rows()
    result = apply(api, TARGET, manifest, dry_run=True)
    assert result["dry_run"] is True and result["config_applied"] is True
    assert result["mental_models_created"] == [] and result["operation_ids"] == []
    assert result["mental_models_updated"] == ["team-stack"]
    assert result["mental_models_unchanged"] == ["people"]
    assert result["directives_unchanged"] == ["Formal"]
    assert result["directives_created"] == ["Scoped"]
    assert rows() == before
    # The real import does what the dry run said.
    real = apply(api, TARGET, manifest)
    assert {k: v for k, v in real.items() if k not in ("dry_run", "operation_ids")} == \
        {k: v for k, v in result.items() if k not in ("dry_run", "operation_ids")}


def test_dry_run_into_a_missing_bank_creates_no_bank() -> None:
    result = apply(APIClient(), "tpl-missing", {"version": "1", "mental_models": [model()],
                                                "directives": [{"name": "A", "content": "B"}]},
                   dry_run=True)
    assert result["mental_models_created"] == ["team-stack"]
    assert result["directives_created"] == ["A"]
    assert not Bank.objects.filter(id="tpl-missing").exists()


def test_two_directives_of_one_name_are_a_409_and_the_whole_import_writes_nothing() -> None:
    make_bank(TARGET)
    directive_create(bank_id=TARGET, name="Twice", content="One.")
    directive_create(bank_id=TARGET, name="Twice", content="Two.")
    before = rows()
    body = apply(APIClient(), TARGET, {
        "version": "1", "bank": {"retain_mission": "New."}, "mental_models": [model()],
        "directives": [{"name": "Twice", "content": "Three."}]}, status=409)
    assert "more than one directive named 'Twice'" in body["detail"]
    assert rows() == before


# --- the schema ----------------------------------------------------------------------------


def test_the_schema_is_a_json_schema_naming_every_config_and_trigger_key() -> None:
    from hindsight.banks.bankconfig import FIELDS

    schema = APIClient().get("/v1/bank-template-schema").json()
    jsonschema.Draft202012Validator.check_schema(schema)
    assert schema["required"] == ["version"]
    bank = schema["properties"]["bank"]
    assert set(bank["properties"]) == set(FIELDS)
    item = schema["properties"]["mental_models"]["items"]
    assert item["required"] == ["id", "name", "source_query"]
    assert set(item["properties"]["trigger"]["properties"]) == set(TRIGGER_DEFAULTS)
    assert schema["properties"]["directives"]["items"]["required"] == ["name", "content"]


# --- bad manifests -------------------------------------------------------------------------


def dotted(loc: Any) -> str:
    return ".".join(str(part) for part in loc)


BAD: list[tuple[Any, list[Any], str]] = [
    ({"version": "2"}, ["version"], "not supported"),
    ({"version": "0"}, ["version"], ">= 1"),
    ({"version": 1}, ["version"], "Input should be a valid string"),
    ({"version": "one"}, ["version"], "String should match pattern"),
    ({}, ["version"], "Field required"),
    ({"version": "1", "extra": 1}, ["extra"], "Extra inputs are not permitted"),
    ({"version": "1", "bank": {"colour": "red"}}, ["bank", "colour"], "Extra inputs"),
    ({"version": "1", "bank": {"disposition_empathy": 9}}, ["bank", "disposition_empathy"],
     "Input should be less than or equal to 5"),
    ({"version": "1", "bank": {"retain_extraction_mode": "loud"}},
     ["bank", "retain_extraction_mode"], "must be one of concise, verbose, custom"),
    ({"version": "1", "bank": {"retain_custom_instructions": "Only names."}},
     ["bank", "retain_custom_instructions"], "requires retain_extraction_mode 'custom'"),
    ({"version": "1", "mental_models": [model("Bad_Id")]}, ["mental_models", 0, "id"],
     "String should match pattern '^[a-z0-9]"),
    ({"version": "1", "mental_models": [model("a" * 65)]}, ["mental_models", 0, "id"],
     "String should match pattern"),
    ({"version": "1", "mental_models": [model(colour="red")]}, ["mental_models", 0, "colour"],
     "Extra inputs"),
    ({"version": "1", "mental_models": [model(max_tokens=100)]},
     ["mental_models", 0, "max_tokens"], "greater than or equal to 256"),
    ({"version": "1", "mental_models": [model(name="  ")]}, ["mental_models", 0, "name"],
     "at least 1 non-blank character"),
    ({"version": "1", "mental_models": [{"id": "x", "name": "X"}]},
     ["mental_models", 0, "source_query"], "Field required"),
    ({"version": "1", "mental_models": [model(trigger={"refresh_cron": "every day"})]},
     ["mental_models", 0, "trigger", "refresh_cron"], "5-field cron"),
    ({"version": "1", "mental_models": [model(trigger={"refresh_cron": "0 3 * * *",
                                                       "refresh_after_consolidation": True})]},
     ["mental_models", 0, "trigger", "refresh_cron"], "mutually exclusive"),
    ({"version": "1", "mental_models": [model(trigger={"fact_types": []})]},
     ["mental_models", 0, "trigger", "fact_types"], "must not be empty"),
    ({"version": "1", "mental_models": [model(trigger={"colour": "red"})]},
     ["mental_models", 0, "trigger", "colour"], "Extra inputs"),
    ({"version": "1", "mental_models": [model(trigger=None)]},
     ["mental_models", 0, "trigger"], "Input should be a valid dictionary"),
    ({"version": "1", "mental_models": [model(), model(name="Again")]},
     ["mental_models", 1, "id"], "duplicate id 'team-stack'"),
    ({"version": "1", "directives": [{"content": "No name."}]}, ["directives", 0, "name"],
     "Field required"),
    ({"version": "1", "directives": [{"name": " ", "content": "Blank name."}]},
     ["directives", 0, "name"], "at least 1 non-blank character"),
    ({"version": "1", "directives": [{"name": "A", "content": "x", "priority": 2**31}]},
     ["directives", 0, "priority"], "less than or equal to 2147483647"),
    ({"version": "1", "directives": [{"name": "A", "content": "x"}, {"name": "A", "content": "y"}]},
     ["directives", 1, "name"], "duplicate name 'A'"),
    ({"version": "1", "directives": [{"name": "A\x00", "content": "x"}]},
     ["directives", 0, "name"], "Null characters are not allowed."),
    ([{"version": "1"}], [], "Input should be a valid dictionary"),
    # A lone surrogate, in a value or a key: refused by the body's parser, as on every route.
    ({"version": "1", "directives": [{"name": "A\ud800", "content": "x"}]}, [], "lone surrogate"),
    ({"version": "1", "bank": {"memory_defense": {"\ud800": 1}}}, [], "lone surrogate"),
    ({"version": "1", "bank": {"default_observation_scopes": "everywhere"}},
     ["bank", "default_observation_scopes"], "Input should be 'per_tag'"),
    ({"version": "1", "directives": [{"name": "", "content": "x"}]}, ["directives", 0, "name"],
     "String should have at least 1 character"),
]


@pytest.mark.parametrize(("manifest", "loc", "words"), BAD,
                         ids=[f"{dotted(loc) or 'body'}-{i}" for i, (_, loc, _) in enumerate(BAD)])
def test_a_bad_manifest_is_a_422_naming_the_field_and_the_rule_and_writes_nothing(
        manifest: Any, loc: list[Any], words: str) -> None:
    make_bank(TARGET)
    bank_config_update(bank_id=TARGET, updates={"retain_mission": "Keep it."})
    before = rows()
    # A good model beside the bad part: the import is one whole, so it is not written either.
    if isinstance(manifest, dict) and "mental_models" not in manifest:
        manifest = {**manifest, "mental_models": [model("good-one")]}
    body = apply(APIClient(), TARGET, manifest, status=422)
    matching = [e for e in body["detail"] if e["loc"] == ["body", *loc]]
    assert matching and words in matching[0]["msg"], body
    assert rows() == before


def test_every_problem_of_a_manifest_is_named_at_once() -> None:
    # The schema's problems first (all of them); with none, every rule's.
    body = apply(APIClient(), TARGET, {"version": "2", "bank": {"colour": "red"},
                                       "mental_models": [model("Bad-id")],
                                       "directives": [{"name": " ", "content": "x"}]},
                 status=422)
    assert [e["loc"] for e in body["detail"]] == [["body", "bank", "colour"],
                                                  ["body", "mental_models", 0, "id"]]
    body = apply(APIClient(), TARGET, {"version": "2", "mental_models": [
        model(), model("other", trigger={"refresh_cron": "x"})],
        "directives": [{"name": " ", "content": "x"}]}, status=422)
    assert [e["loc"] for e in body["detail"]] == [
        ["body", "version"], ["body", "mental_models", 1, "trigger", "refresh_cron"],
        ["body", "directives", 0, "name"]]
    assert not Bank.objects.filter(id=TARGET).exists()
