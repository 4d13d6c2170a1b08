"""Bank transfer through the official hindsight-client 1.1.0 (live_server + a real worker):
export_bank → import_bank into a new id and clone_bank give back the same bank — memories and
their clocks, observations, models with content, trigger and history, the knowledge tree,
directives, config, the request log — fresh as it was, with no chat request to the LLM."""

from __future__ import annotations

from typing import Any

import pytest
from hindsight_client import Hindsight
from hindsight_client.hindsight_client import _run_async

from hindsight.banks.models import Bank, MemoryUnit
from hindsight.infra.llm.models import LLMRequest
from mentalmodels.directives.models import Directive, DirectiveScopeStamp
from mentalmodels.knowledge.models import KnowledgeNode
from mentalmodels.models import MentalModel, MentalModelHistory
from mentalmodels.staleness import stale_flags
from tests.transfer.archives import entry, rewritten, upstream_archive
from tests.transfer.conftest import build_bank
from tests.workers import wait_until

pytestmark = pytest.mark.integration


def finished(client: Hindsight, bank: str, op_id: str) -> Any:
    return wait_until(
        lambda: (s := _run_async(client.operations.get_operation_status(bank, op_id))).status
        in ("completed", "failed", "cancelled") and s,
        timeout=60, interval=0.2, message=f"operation {op_id} finished")


def snapshot(bank_id: str) -> dict[str, Any]:
    """Everything a move must keep, by value (never by id: memory ids are new)."""
    texts = dict(MemoryUnit.objects.filter(bank_id=bank_id).values_list("id", "text"))
    memories = sorted(
        (m.text, m.fact_type, tuple(m.tags), m.document_id, m.context, m.metadata,
         tuple(m.entities), m.mentioned_at, m.consolidated_at, m.created_at, m.updated_at,
         tuple(sorted(texts[s] for s in m.source_memory_ids)))
        for m in MemoryUnit.objects.filter(bank_id=bank_id))
    models = {
        m.mental_model_id: (m.name, m.source_query, m.content, m.document, tuple(m.tags),
                            m.trigger, m.max_tokens, m.last_memory_seen_at, m.last_refreshed_at,
                            m.last_refresh_source_query,
                            [(h.kind, h.previous_content, h.outcome, h.reason, h.exception,
                              h.changed_at)
                             for h in MentalModelHistory.objects.filter(model=m).order_by("id")])
        for m in MentalModel.objects.filter(bank_id=bank_id)}
    names = dict(KnowledgeNode.objects.filter(bank_id=bank_id).values_list("id", "name"))
    tree = sorted((n.kind, n.name, names.get(n.parent_id or ""),
                   n.mental_model.mental_model_id if n.mental_model else None)
                  for n in KnowledgeNode.objects.filter(bank_id=bank_id).select_related("mental_model"))
    directives = sorted((d.name, d.content, d.priority, d.is_active, tuple(d.tags))
                        for d in Directive.objects.filter(bank_id=bank_id))
    stamps = sorted((tuple(s.tags), s.changed_at)
                    for s in DirectiveScopeStamp.objects.filter(bank_id=bank_id))
    bank = Bank.objects.get(id=bank_id)
    requests = sorted((r.operation, r.prompt, r.response, r.input_tokens)
                      for r in LLMRequest.objects.filter(bank_id=bank_id))
    return {"memories": memories, "models": models, "tree": tree, "directives": directives,
            "stamps": stamps, "config": bank.config, "disposition": bank.disposition,
            "requests": requests}


def cited(bank_id: str) -> list[str]:
    model = MentalModel.objects.get(bank_id=bank_id, mental_model_id="team-stack")
    # Looked up in the bank itself: the evidence must name the bank's own (new) memories.
    return [MemoryUnit.objects.get(id=e["id"], bank_id=bank_id).text
            for e in model.reflect_response["based_on"]["world"]]


def test_export_then_import_into_a_new_id_gives_back_the_same_bank(
        client: Hindsight, scripted_llm, worker_factory) -> None:
    worker_factory(env=scripted_llm.env)
    build_bank("source")
    before = snapshot("source")

    archive = client.export_bank("source", include_history=True, poll_interval=0.2, timeout=60)
    op_id = client.import_bank("source", archive, target_bank_id="copy", include_history=True)
    done = finished(client, "source", op_id)
    assert done.status == "completed", done.error_message

    assert snapshot("copy") == before
    # Every memory re-embedded here (the observation had no vector at the source).
    assert not MemoryUnit.objects.filter(bank_id="copy", embedding__isnull=True).exists()
    assert snapshot("source") == before
    assert cited("copy") == ["The team writes its services in Python."]
    models = list(MentalModel.objects.filter(bank_id="copy"))
    assert not any(stale_flags(models).values())
    assert client.get_mental_model("copy", "team-stack").is_stale is False
    assert done.result_metadata["facts_imported"] == 3
    assert done.result_metadata["observations_imported"] == 1
    assert done.result_metadata["mental_models_imported"] == 1
    assert done.result_metadata["knowledge_pages_imported"] == 2
    assert done.result_metadata["directives_imported"] == 2
    assert scripted_llm.requests == []


def test_clone_gives_the_same_bank_under_another_id(
        client: Hindsight, scripted_llm, worker_factory) -> None:
    worker_factory(env=scripted_llm.env)
    build_bank("source")
    before = snapshot("source")
    op_id = client.clone_bank("source", "twin")
    done = finished(client, "source", op_id)
    assert done.status == "completed", done.error_message
    after = snapshot("twin")
    assert after == {**before, "requests": []}  # the request log only with include_history
    assert not set(KnowledgeNode.objects.filter(bank_id="twin").values_list("id", flat=True)) & \
        set(KnowledgeNode.objects.filter(bank_id="source").values_list("id", flat=True))
    assert scripted_llm.requests == []


def test_an_archive_written_by_upstream_restores_here(
        client: Hindsight, scripted_llm, worker_factory) -> None:
    # tests/fixtures/upstream-1.1.0-bank.zip: written by upstream 1.1.0's own export_bank
    # (tests/fixtures/README.md says how).
    worker_factory(env=scripted_llm.env)
    client.create_bank("host")
    op_id = client.import_bank("host", upstream_archive(), target_bank_id="moved")
    done = finished(client, "host", op_id)
    assert done.status == "completed", done.error_message

    memories = list(MemoryUnit.objects.filter(bank_id="moved"))
    assert sorted((m.text, m.fact_type, tuple(m.tags), m.document_id is not None, m.context)
                  for m in memories) == sorted([
        ("The team writes its services in Python.", "world", ("team",), True, ""),
        ("The team stores data in PostgreSQL with pgvector.", "world", ("team",), True, ""),
        ("Alice leads the platform group.", "world", ("people",), True, "org chart"),
        ("Observation: the team builds on Python and PostgreSQL.", "observation", ("team",),
         False, ""),
        ("Observation: the team builds on Python and PostgreSQL.", "observation", ("people",),
         False, ""),
    ])
    assert MemoryUnit.objects.get(bank_id="moved", text__contains="Python.").document_id == "doc-lang"
    team = MemoryUnit.objects.get(bank_id="moved", fact_type="observation", tags=["team"])
    assert sorted(MemoryUnit.objects.get(id=s).text for s in team.source_memory_ids) == [
        "The team stores data in PostgreSQL with pgvector.",
        "The team writes its services in Python."]
    assert not MemoryUnit.objects.filter(bank_id="moved", embedding__isnull=True).exists()

    model = client.get_mental_model("moved", "team-stack")
    assert model.name == "Team stack" and model.tags == ["team"]
    assert model.content.startswith("## answer") and model.trigger.mode == "full"
    assert cited("moved") == ["The team writes its services in Python.",
                              "The team stores data in PostgreSQL with pgvector."]
    history = client.get_mental_model_history("moved", "team-stack")
    assert [h["previous_content"][:9] if h["previous_content"] else h["previous_content"]
            for h in history] == ["## answer", "## answer", ""]
    tree = client.get_knowledge_base_tree("moved")
    [folder] = tree.roots
    assert folder.name == "Guides" and [c.name for c in folder.children] == ["Onboarding"]
    [directive] = client.list_directives("moved").items
    assert (directive.name, directive.content, directive.priority) == (
        "Formal", "Answer in formal English.", 5)
    config = client.get_bank_config("moved")["config"]
    assert config["reflect_mission"] == "Answer about the team."
    assert config["mental_model_min_refresh_interval_seconds"] == 0
    assert scripted_llm.requests == []


def test_a_problem_found_while_importing_fails_the_operation_naming_it(
        client: Hindsight, scripted_llm, worker_factory) -> None:
    worker_factory(env=scripted_llm.env)
    client.create_bank("host")
    models = entry(upstream_archive(), "mental_models.json")
    models[0]["trigger"] = {"mode": "sideways"}
    archive = rewritten(upstream_archive(), {"mental_models.json": models})
    op_id = client.import_bank("host", archive, target_bank_id="broken")
    done = finished(client, "host", op_id)
    assert done.status == "failed"
    assert "mental_models.json[0].trigger.mode" in done.error_message
    assert not Bank.objects.filter(id="broken").exists()
    assert done.retry_count == 0  # no attempt can read it better
