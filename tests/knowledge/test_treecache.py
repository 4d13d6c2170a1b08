"""The tree answered by version: every write that can change what the tree shows changes the
version (so no answer kept under the old one is served again), an unchanged tree is answered
from one statement (or a 304), and a tree read while a memory write is in flight is not kept."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

import psycopg
import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from rest_framework.renderers import JSONRenderer
from rest_framework.test import APIClient

from hindsight.banks.models import MemoryUnit
from hindsight.banks.services import bank_delete
from mentalmodels.knowledge import selectors, services
from mentalmodels.knowledge.api import treecache
from mentalmodels.knowledge.api.serializers import KnowledgeTreeResponseSerializer
from mentalmodels.knowledge.api.treecache import RenderedTrees
from mentalmodels.knowledge.models import KnowledgeNode
from mentalmodels.knowledge.selectors import PageFilter
from mentalmodels.knowledge.services import NodeUpdate
from mentalmodels.models import MentalModel
from mentalmodels.services import (
    mental_model_clear,
    mental_model_delete,
    mental_model_record_failure,
    mental_model_update,
)
from tests.factories import make_bank, make_memory

pytestmark = pytest.mark.django_db

BANK = "kb-cache"
TREE = f"/v1/default/banks/{BANK}/knowledge-base/tree"


@pytest.fixture(autouse=True)
def _empty_cache() -> Any:
    treecache.rendered_trees.clear()
    yield
    treecache.rendered_trees.clear()


def _folder(name: str, parent: KnowledgeNode | None = None) -> KnowledgeNode:
    return services.knowledge_folder_create(bank_id=BANK, name=name,
                                            parent_id=parent.id if parent else None)


def _page(name: str, parent: KnowledgeNode | None = None, **kwargs: Any) -> KnowledgeNode:
    node, _ = services.knowledge_page_create(bank_id=BANK, name=name,
                                             source_query=f"About {name}?",
                                             parent_id=parent.id if parent else None, **kwargs)
    return node


def _update(node: KnowledgeNode, **fields: Any) -> None:
    services.knowledge_node_update(bank_id=BANK, node_id=node.id, update=NodeUpdate(**fields))


def _model(node: KnowledgeNode) -> MentalModel:
    return MentalModel.objects.get(knowledge_node__id=node.id)


def _version() -> selectors.TreeVersion | None:
    return selectors.knowledge_tree_version(bank_id=BANK).version


def _refresh_done(n: dict[str, Any]) -> None:
    # What a refresh's persistence writes (mentalmodels.refresh.persistence), past the service.
    now = timezone.now()
    MentalModel.objects.filter(uid=_model(n["runbook"]).uid).update(
        content="# Runbook", last_refreshed_at=now, last_memory_seen_at=now)


def _tree() -> dict[str, Any]:
    """Ops/ (Runbook page tagged ops, refreshed after a memory in its scope), Team/ (Sub/),
    Root page (never refreshed); the bank's newest memory is out of the page's scope."""
    make_bank(BANK)
    ops, team = _folder("Ops"), _folder("Team")
    sub = _folder("Sub", team)
    runbook = _page("Runbook", ops, tags=["ops"])
    root = _page("Root page")
    make_memory(BANK, "The pager rotates weekly.", tags=["ops"], fact_type="observation")
    make_memory(BANK, "Lunch is at noon.", tags=["food"])
    nodes = {"ops": ops, "team": team, "sub": sub, "runbook": runbook, "root": root}
    _refresh_done(nodes)
    return nodes


def _pause(n: dict[str, Any]) -> None:
    mental_model_record_failure(model_uid=_model(n["runbook"]).uid, reason="boom",
                                exception="RuntimeError", operation_id=None, final=True)


def _memory_retagged(n: dict[str, Any]) -> None:
    # Out of the page's scope without a later stamp (no service does this; a raw UPDATE may).
    MemoryUnit.objects.filter(bank_id=BANK, tags=["ops"]).update(tags=["elsewhere"])


WRITES: dict[str, Callable[[dict[str, Any]], Any]] = {
    "retain in scope": lambda n: make_memory(BANK, "Ops moved to Slack.", tags=["ops"],
                                             fact_type="observation"),
    "retain out of scope": lambda n: make_memory(BANK, "Dinner is at six.", tags=["food"]),
    # Not the newest: the bank's last memory write stays.
    "memory deleted": lambda n: MemoryUnit.objects.filter(bank_id=BANK, tags=["ops"]).delete(),
    "memory re-tagged unstamped": _memory_retagged,
    "refresh done": _refresh_done,
    "refresh failed (paused)": _pause,
    "clear": lambda n: mental_model_clear(bank_id=BANK,
                                          mental_model_id=_model(n["runbook"]).mental_model_id),
    "page created": lambda n: _page("New page", n["sub"]),
    "page renamed": lambda n: _update(n["runbook"], name="Playbook"),
    "page moved": lambda n: _update(n["runbook"], parent_id=n["sub"].id),
    "page moved to the root": lambda n: _update(n["runbook"], parent_id=None),
    "page tags changed": lambda n: _update(n["runbook"], tags=["ops", "team"]),
    "page trigger changed": lambda n: _update(n["runbook"], trigger={"fact_types": ["world"]}),
    "page question changed": lambda n: _update(n["runbook"], source_query="What now?"),
    "page deleted": lambda n: services.knowledge_node_delete(bank_id=BANK,
                                                             node_id=n["root"].id),
    "page's model tags changed (MM API)": lambda n: mental_model_update(
        bank_id=BANK, mental_model_id=_model(n["root"]).mental_model_id, tags=["x"]),
    "page's model deleted (MM API)": lambda n: mental_model_delete(
        bank_id=BANK, mental_model_id=_model(n["root"]).mental_model_id),
    "folder created": lambda n: _folder("Empty", n["ops"]),
    "folder renamed": lambda n: _update(n["sub"], name="Deeper"),
    "folder moved": lambda n: _update(n["sub"], parent_id=n["ops"].id),
    "folder deleted": lambda n: services.knowledge_node_delete(bank_id=BANK,
                                                               node_id=n["team"].id),
    "written past the services": lambda n: KnowledgeNode.objects.filter(
        id=n["ops"].id).update(name="Operations"),
    "nodes emptied (TRUNCATE)": lambda n: _truncate("knowledge_knowledgenode"),
    "memories emptied (TRUNCATE)": lambda n: _truncate("banks_memoryunit"),
}


def _truncate(table: str) -> None:
    with connection.cursor() as cursor:
        # (The test's own transaction still holds the deferred foreign-key checks of its rows.)
        cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
        cursor.execute(f"TRUNCATE {table} CASCADE")


@pytest.mark.parametrize("write", list(WRITES), ids=list(WRITES))
def test_every_write_that_can_change_the_tree_changes_its_version(write):
    nodes = _tree()
    tree = selectors.knowledge_tree(
        bank_id=BANK, cutoff=selectors.knowledge_tree_version(bank_id=BANK).cutoff)
    before = _version()
    assert tree.version is not None and tree.version == before
    WRITES[write](nodes)
    assert _version() != before


def test_a_deleted_and_remade_bank_never_repeats_a_version():
    _tree()
    before = _version()
    bank_delete(bank_id=BANK)
    assert _version() is None
    make_bank(BANK)
    _folder("Ops")
    _page("Runbook")
    assert _version() != before


def test_a_write_the_tree_does_not_show_leaves_the_version():
    nodes = _tree()
    before = _version()
    MentalModel.objects.filter(uid=_model(nodes["runbook"]).uid).update(
        cron_checked_at=timezone.now(), embedding_model="m")
    MemoryUnit.objects.filter(bank_id=BANK).update(consolidated_at=timezone.now())
    assert _version() == before


def _get(api: APIClient, etag: str | None = None, **query: Any) -> Any:
    headers = {"HTTP_IF_NONE_MATCH": etag} if etag else {}
    return api.get(TREE, query, **headers)


def _flags(response: Any) -> dict[str, bool | None]:
    out: dict[str, bool | None] = {}

    def walk(nodes: list[dict[str, Any]]) -> None:
        for node in nodes:
            out[node["name"]] = node["is_stale"]
            walk(node["children"])

    walk(response.json()["roots"])
    return out


def test_an_unchanged_tree_is_one_statement_and_a_304_and_a_change_is_served_fresh():
    nodes = _tree()
    api = APIClient()
    first = _get(api)
    assert first.status_code == 200 and first["Cache-Control"] == "no-cache"
    etag = first["ETag"]
    assert _flags(first)["Runbook"] is False
    with CaptureQueriesContext(connection) as captured:
        again = _get(api)
    assert len(captured) == 1 and "knowledge_knowledgenode" not in captured[0]["sql"]
    assert again.content == first.content and again["ETag"] == etag
    with CaptureQueriesContext(connection) as captured:
        unchanged = _get(api, etag)
    assert unchanged.status_code == 304 and unchanged["ETag"] == etag and len(captured) == 1
    assert _get(api, f'W/{etag}, "other"').status_code == 304
    assert _get(api, '"other"').status_code == 200
    # Another filter is another answer.
    filtered = _get(api, etag, tags="ops", tags_match="all_strict")
    assert filtered.status_code == 200 and filtered["ETag"] != etag
    assert set(_flags(filtered)) == {"Ops", "Runbook"}

    make_memory(BANK, "Ops moved to Slack.", tags=["ops"], fact_type="observation")
    stale = _get(api, etag)
    assert stale.status_code == 200 and stale["ETag"] != etag
    assert _flags(stale)["Runbook"] is True
    _update(nodes["runbook"], name="Playbook")
    renamed = _get(api, stale["ETag"])
    assert renamed.status_code == 200 and "Playbook" in _flags(renamed)


def test_the_tree_kept_answers_the_same_bytes_as_a_fresh_read():
    _tree()
    api = APIClient()
    kept = _get(api)
    _get(api)
    treecache.rendered_trees.clear()
    assert _get(api).content == kept.content


@pytest.fixture
def other_session(django_db_setup: Any) -> Any:
    settings = connection.settings_dict
    conn = psycopg.connect(host=settings["HOST"], port=settings["PORT"], user=settings["USER"],
                           password=settings["PASSWORD"] or None, dbname=settings["NAME"])
    yield conn
    conn.close()


def test_a_tree_read_while_a_memory_write_is_in_flight_is_not_kept(other_session):
    _tree()
    api = APIClient()
    # Another session's retain holding the bank's write lock (hindsight.banks.writeclock).
    other_session.execute("SELECT pg_advisory_xact_lock_shared(%s, hashtext(%s))",
                          [0x48534D, BANK])
    read = _get(api)
    assert read.status_code == 200 and not read.has_header("ETag")
    with CaptureQueriesContext(connection) as captured:
        assert not _get(api).has_header("ETag")
    assert len(captured) > 1  # read afresh: nothing was kept
    other_session.rollback()
    assert _get(api).has_header("ETag")


def test_a_stamp_after_the_cutoff_is_not_vouched_for():
    _tree()
    version = _version()
    assert version is not None and version.memory_write is not None
    later = version.memory_write + timedelta(seconds=1)
    assert selectors._vouched(version, later) == version
    assert selectors._vouched(version, version.memory_write - timedelta(microseconds=1)) is None
    assert selectors._vouched(version, None) is None
    assert selectors._vouched(version._replace(tree=None), later) is None


def test_the_rendered_trees_keep_to_their_budget_least_recently_used_out():
    kept = RenderedTrees(budget=10)
    a, b, c = ("a", PageFilter()), ("b", PageFilter()), ("c", PageFilter())
    kept.put(a, "1", b"xxxx")
    kept.put(b, "1", b"yyyy")
    assert kept.get(a, "1") == b"xxxx"  # a is now the most recent
    kept.put(c, "1", b"zzzz")
    assert kept.get(b, "1") is None and kept.get(a, "1") == b"xxxx"
    assert kept.get(a, "2") is None  # another version is not this one
    kept.put(a, "2", b"x" * 11)  # too big to keep: and the old one is gone
    assert kept.get(a, "1") is None and kept.get(c, "1") == b"zzzz"


@pytest.mark.parametrize("page_filter", [PageFilter(), PageFilter(tags=("ops",)),
                                         PageFilter(tags=("ops",), tags_match="exact")],
                         ids=["whole", "any ops", "exact ops"])
def test_the_tree_written_straight_is_the_declared_rendering_byte_for_byte(page_filter):
    nodes = _tree()
    odd = _folder('Qu"ote\\ \u2028 \u2029 \x01 é 名', nodes["sub"])
    _page("Tab\there \U0001f600", odd, tags=["ops", 'ta"g', "ünï"])
    _page("Plain", nodes["sub"], tags=["ops"], trigger={"fact_types": ["world"]})
    _pause(nodes)
    tree = selectors.knowledge_tree(bank_id=BANK, page_filter=page_filter)
    if not page_filter.active:
        assert set(tree.stale.values()) == {True, False}
    declared = JSONRenderer().render(
        KnowledgeTreeResponseSerializer.render_tree(tree.nodes, tree.stale))
    assert KnowledgeTreeResponseSerializer.render_tree_json(tree.nodes, tree.stale) == declared
    assert KnowledgeTreeResponseSerializer.render_tree_json([], {}) == JSONRenderer().render(
        KnowledgeTreeResponseSerializer.render_tree([], {}))
