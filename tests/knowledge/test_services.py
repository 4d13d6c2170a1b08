"""The knowledge base's domain: tree writes (services), reads (selectors) and the database's
own guarantees (unique sibling names, the cycle/parent trigger)."""

from __future__ import annotations

import pytest
from django.db import IntegrityError, connection, transaction
from django.test.utils import CaptureQueriesContext

from hindsight.infra.errors import BadRequest, Conflict, FieldErrors, NotFound
from mentalmodels.knowledge import selectors, services
from mentalmodels.knowledge.models import MAX_DEPTH, KnowledgeNode, NodeKind
from mentalmodels.knowledge.selectors import PageFilter
from mentalmodels.knowledge.services import NodeUpdate
from mentalmodels.models import MentalModel
from mentalmodels.selectors import mental_models_list
from mentalmodels.services import mental_model_delete
from operations.models import Operation
from tests.factories import make_bank, make_memory

pytestmark = pytest.mark.django_db

BANK = "kb-bank"


@pytest.fixture
def bank_id() -> str:
    return BANK


def folder(name: str, parent: KnowledgeNode | None = None) -> KnowledgeNode:
    return services.knowledge_folder_create(bank_id=BANK, name=name,
                                            parent_id=parent.id if parent else None)


def page(name: str, parent: KnowledgeNode | None = None, **kwargs) -> KnowledgeNode:
    node, _ = services.knowledge_page_create(bank_id=BANK, name=name, source_query=f"About {name}?",
                                             parent_id=parent.id if parent else None, **kwargs)
    return node


def move(node: KnowledgeNode, parent: KnowledgeNode | None) -> KnowledgeNode:
    return services.knowledge_node_update(bank_id=BANK, node_id=node.id,
                                          update=NodeUpdate(parent_id=parent.id if parent else None))


def test_a_page_is_a_mental_model_with_upstreams_page_defaults_and_a_queued_first_refresh(bank):
    node, operation = services.knowledge_page_create(bank_id=BANK, name="Runbook",
                                                     source_query="How do we deploy?")
    assert node.id.startswith("kp-") and len(node.id) == 35 and node.kind == NodeKind.PAGE
    model = node.mental_model
    assert model.mental_model_id.startswith("mm-") and model.source_query == "How do we deploy?"
    assert model.max_tokens == 4096 and model.is_knowledge_page
    trigger = model.trigger
    assert (trigger["mode"], trigger["fact_types"], trigger["exclude_mental_models"],
            trigger["refresh_after_consolidation"]) == ("delta", ["observation"], True, True)
    op = Operation.objects.get(id=operation.id)
    assert op.mental_model_id == model.mental_model_id and op.status == "pending"
    assert folder("Ops").id.startswith("kf-")


def test_a_pages_trigger_merges_over_the_page_default_and_the_banks_default(bank):
    world = page("World", trigger={"fact_types": ["world"], "keep_trace": True}).mental_model
    assert world.trigger["mode"] == "delta" and world.trigger["fact_types"] == ["world"]
    assert world.trigger["keep_trace"] is True
    # Naming a cron turns the default after-consolidation refresh off (upstream's page rule).
    cron = page("Cron", trigger={"refresh_cron": "0 3 * * *"}).mental_model
    assert cron.trigger["refresh_cron"] == "0 3 * * *"
    assert cron.trigger["refresh_after_consolidation"] is False
    bank.config = {"knowledge_page_default_trigger": {"mode": "full", "budget": "low"}}
    bank.save()
    configured = page("Configured", max_tokens=512).mental_model
    assert configured.trigger["mode"] == "full" and configured.trigger["budget"] == "low"
    assert configured.trigger["fact_types"] == ["observation"] and configured.max_tokens == 512
    with pytest.raises(FieldErrors) as bad:
        page("Bad", trigger={"mode": "sideways"})
    assert bad.value.errors[0]["loc"] == ["body", "trigger", "mode"]
    assert not MentalModel.objects.filter(name="Bad").exists()


def test_names_are_unique_among_siblings_case_insensitively_at_the_root_too(bank):
    ops = folder("Ops")
    page("Runbook")
    with pytest.raises(Conflict, match="A page named 'runbook' already exists"):
        page("runbook")
    # Nothing of the refused page was kept: not its mental model, not its refresh.
    assert MentalModel.objects.filter(bank_id=BANK).count() == 1
    assert Operation.objects.filter(bank_id=BANK).count() == 1
    with pytest.raises(Conflict, match="A folder named 'OPS' already exists"):
        folder("OPS")
    assert page("Runbook", parent=ops).parent_id == ops.id  # another folder: fine
    second = folder("Second")
    with pytest.raises(Conflict):
        services.knowledge_node_update(bank_id=BANK, node_id=second.id,
                                       update=NodeUpdate(name="ops"))
    # The database itself refuses a duplicate under a null parent (the root).
    with pytest.raises(IntegrityError), transaction.atomic():
        KnowledgeNode.objects.create(id="kf-raw", bank_id=BANK, kind=NodeKind.FOLDER, name="ops")


def test_a_parent_must_be_a_folder_of_the_bank(bank):
    runbook = page("Runbook")
    with pytest.raises(BadRequest, match="parent_id: Parent 'kp-.*' is not a folder"):
        folder("Under a page", parent=runbook)
    with pytest.raises(BadRequest, match="parent_id: Parent folder 'kf-nope' not found"):
        services.knowledge_folder_create(bank_id=BANK, name="x", parent_id="kf-nope")
    make_bank("other")
    foreign = services.knowledge_folder_create(bank_id="other", name="Theirs")
    with pytest.raises(BadRequest, match="not found"):
        services.knowledge_folder_create(bank_id=BANK, name="x", parent_id=foreign.id)


def test_a_move_under_the_node_itself_or_its_descendant_is_refused(bank):
    a = folder("A")
    b = folder("B", parent=a)
    c = folder("C", parent=b)
    with pytest.raises(BadRequest, match="A node cannot be its own parent"):
        move(a, a)
    with pytest.raises(BadRequest, match="Cannot move a node into its own subtree"):
        move(a, c)
    moved = move(c, None)
    assert moved.parent_id is None
    assert move(b, c).parent_id == c.id


def test_the_database_refuses_a_cycle_and_a_non_folder_parent_written_past_the_services(bank):
    a = folder("A")
    b = folder("B", parent=a)
    runbook = page("Runbook")
    with pytest.raises(IntegrityError, match="would make a cycle"), transaction.atomic():
        KnowledgeNode.objects.filter(id=a.id).update(parent_id=b.id)
    with pytest.raises(IntegrityError, match="not a folder"), transaction.atomic():
        KnowledgeNode.objects.filter(id=b.id).update(parent_id=runbook.id)
    with pytest.raises(IntegrityError), transaction.atomic():
        KnowledgeNode.objects.filter(id=a.id).update(parent_id=a.id)


def test_folders_nest_at_most_max_depth(bank):
    parent = None
    chain = []
    for level in range(MAX_DEPTH):
        parent = folder(f"L{level}", parent=parent)
        chain.append(parent)
    with pytest.raises(BadRequest, match=f"at most {MAX_DEPTH} levels"):
        folder("too deep", parent=parent)
    # Moving a two-level subtree under the deepest-but-one folder would also pass the limit.
    top = folder("Top")
    folder("Child", parent=top)
    with pytest.raises(BadRequest, match=f"at most {MAX_DEPTH} levels"):
        move(top, chain[-2])


def test_a_rename_renames_the_pages_model_and_a_new_question_queues_a_refresh(bank):
    node = page("Runbook")
    model = node.mental_model
    Operation.objects.all().delete()
    services.knowledge_node_update(bank_id=BANK, node_id=node.id, update=NodeUpdate(
        name="Deploy runbook", tags=["ops"], max_tokens=1024,
        trigger={"refresh_cron": "0 3 * * *"}))
    model.refresh_from_db()
    assert model.name == "Deploy runbook" and model.tags == ["ops"] and model.max_tokens == 1024
    assert model.trigger["refresh_cron"] == "0 3 * * *"
    assert model.trigger["refresh_after_consolidation"] is False
    assert model.trigger["mode"] == "delta"  # the keys not sent keep their values
    assert not Operation.objects.exists()  # nothing that changes the answer: no refresh
    services.knowledge_node_update(bank_id=BANK, node_id=node.id,
                                   update=NodeUpdate(source_query="How do we roll back?"))
    assert Operation.objects.get().mental_model_id == model.mental_model_id


def test_page_options_on_a_folder_and_an_empty_patch_are_refused_changing_nothing(bank):
    ops = folder("Ops")
    with pytest.raises(FieldErrors) as bad:
        services.knowledge_node_update(bank_id=BANK, node_id=ops.id,
                                       update=NodeUpdate(name="Renamed", tags=["x"]))
    assert bad.value.errors[0]["loc"] == ["body", "tags"]
    ops.refresh_from_db()
    assert ops.name == "Ops"
    with pytest.raises(BadRequest, match="Provide name, parent_id"):
        services.knowledge_node_update(bank_id=BANK, node_id=ops.id, update=NodeUpdate())
    with pytest.raises(NotFound, match="Knowledge node 'kf-nope' not found"):
        services.knowledge_node_update(bank_id=BANK, node_id="kf-nope",
                                       update=NodeUpdate(name="x"))


def test_deleting_a_folder_deletes_its_subtree_and_the_pages_models(bank):
    ops = folder("Ops")
    inner = folder("Inner", parent=ops)
    page("A", parent=ops)
    page("B", parent=inner)
    kept = page("Kept")
    services.knowledge_node_delete(bank_id=BANK, node_id=ops.id)
    assert list(KnowledgeNode.objects.values_list("id", flat=True)) == [kept.id]
    assert list(MentalModel.objects.values_list("uid", flat=True)) == [kept.mental_model.uid]
    # Queued refreshes of the deleted pages were cancelled; the kept page's stays.
    assert set(Operation.objects.filter(status="pending").values_list(
        "mental_model_id", flat=True)) == {kept.mental_model.mental_model_id}
    # Deleting a page's model through the mental-model API takes the page with it.
    mental_model_delete(bank_id=BANK, mental_model_id=kept.mental_model.mental_model_id)
    assert not KnowledgeNode.objects.exists()
    with pytest.raises(NotFound):
        services.knowledge_node_delete(bank_id=BANK, node_id=kept.id)


def test_the_tree_is_in_folder_order_and_prunes_by_tags(bank):
    ops = folder("Ops")
    folder("Empty")
    page("Zeta", parent=ops, tags=["ops"])
    page("Alpha", parent=ops, tags=["team"])
    page("Root page")
    tree = selectors.knowledge_tree(bank_id=BANK)
    assert [n.name for n in tree.nodes] == ["Empty", "Ops", "Alpha", "Zeta", "Root page"]
    only_ops = selectors.knowledge_tree(bank_id=BANK, page_filter=PageFilter(
        tags=("ops",), tags_match="any_strict"))
    assert [n.name for n in only_ops.nodes] == ["Ops", "Zeta"]
    # ``any`` keeps untagged pages (recall's semantics), and the empty folder goes.
    with_untagged = selectors.knowledge_tree(bank_id=BANK, page_filter=PageFilter(tags=("ops",)))
    assert [n.name for n in with_untagged.nodes] == ["Ops", "Zeta", "Root page"]
    with pytest.raises(NotFound, match="Bank 'nope' not found"):
        selectors.knowledge_tree(bank_id="nope")


def test_a_page_turns_stale_after_an_in_scope_memory_on_the_tree_in_bounded_queries(bank):
    pages = [page(f"P{i}", tags=["team"] if i % 2 else ["ops"],
                  trigger={"fact_types": ["world"]}) for i in range(40)]
    make_memory(BANK, "The team ships on Fridays.", tags=["team"])
    with CaptureQueriesContext(connection) as captured:
        tree = selectors.knowledge_tree(bank_id=BANK)
    # The tree, the staleness probe, and the bank's directive change stamps (a directive
    # change stales the pages it applies to): constant, whatever the number of pages.
    assert len(captured) <= 3
    stale = {n.name for n in tree.nodes if tree.stale.get(n.id)}
    assert stale == {p.name for i, p in enumerate(pages) if i % 2}


def test_the_mental_model_list_marks_pages_and_can_leave_them_out(bank):
    page("Runbook")
    MentalModel.objects.create(bank_id=BANK, mental_model_id="plain", name="Plain",
                               source_query="q?", trigger={})
    for detail in ("metadata", "content", "full"):
        listed = mental_models_list(bank_id=BANK, detail=detail)
        assert {m.name: m.is_knowledge_page for m in listed.items} == {
            "Runbook": True, "Plain": False}
    only = mental_models_list(bank_id=BANK, exclude_knowledge_pages=True)
    assert [m.name for m in only.items] == ["Plain"] and only.total == 1


def test_search_finds_pages_by_name_and_content_with_fused_scores(bank, openai_embeddings):
    deploy = page("Deploy runbook")
    MentalModel.objects.filter(uid=deploy.mental_model.uid).update(
        content="Roll back with the blue-green switch.")
    page("Holidays")
    page("Hidden deploy notes", tags=["secret"])
    hits = selectors.knowledge_search(bank_id=BANK, query="deploy",
                                      page_filter=PageFilter(tags=("secret",),
                                                             tags_match="all_strict"))
    assert [h.name for h in hits] == ["Hidden deploy notes"]
    hits = selectors.knowledge_search(bank_id=BANK, query="blue-green rollback deploy")
    assert hits[0].name == "Deploy runbook"
    assert 0 < hits[-1].score <= hits[0].score <= 1.0
    with pytest.raises(NotFound):
        selectors.knowledge_search(bank_id="nope", query="x")


def test_the_export_reads_every_page_and_its_history_in_bounded_queries(bank):
    ops = folder("Ops")
    for i in range(10):
        page(f"P{i}", parent=ops)
    with CaptureQueriesContext(connection) as captured:
        export = selectors.knowledge_export(bank_id=BANK)
    assert len(captured) <= 3
    assert len(export.pages) == 10 and len(export.nodes) == 11
