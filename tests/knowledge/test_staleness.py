"""The tree's per-page ``is_stale`` is the one staleness rule batched: the tree (one probe
statement for every distinct scope of its pages, over the bank's memories or over them grouped
by tags and fact type) gives exactly the flags of the rule asked one
page at a time and of the rule written out independently (``reference_stale``), over a grid of
flat tag scopes x every ``tags_match`` x fact types, ``tag_groups`` scopes, untagged pages,
and pages never refreshed, past the watermark, at a memory's stamp and at the bank's last write
(one scope's pages with several watermarks: its probe shared by all of them).

The memories after the middle watermark are few and chosen so that neighbouring scopes differ
(``any`` / ``all`` of two tags, ``exact`` of one tag against a memory carrying two, untagged
memories under a tagged and an untagged scope): a batch that probed one scope for another
answers some page wrongly, which the reference sees."""

from __future__ import annotations

import itertools
from datetime import datetime
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from rest_framework.test import APIClient

from hindsight.infra import tagscope
from mentalmodels.knowledge.models import KnowledgeNode, NodeKind
from mentalmodels.knowledge.selectors import knowledge_tree
from mentalmodels.models import MentalModel
from mentalmodels.staleness import stale_flags
from mentalmodels.triggers import trigger_normalize
from tests.factories import make_bank, make_memory
from tests.mentalmodels.test_staleness import reference_stale

pytestmark = pytest.mark.django_db

BANK = "kb-stale"
FLAT_TAGS: list[tuple[str, ...]] = [(), ("team",), ("ops",), ("team", "ops"), ("hr",)]
MODES = [None, "any", "all", "any_strict", "all_strict", "exact"]
FACT_TYPES: list[list[str] | None] = [None, ["world"], ["observation"]]
GROUPS: list[list[dict[str, Any]]] = [
    [{"or": [{"tags": ["team"], "match": "all_strict"}, {"tags": ["eng"]}]}],
    [{"not": {"tags": ["ops"], "match": "any"}}],
    [{"tags": ["team", "ops"], "match": "any"}, {"not": {"tags": ["eng"]}}],
]


def _memories() -> tuple[list[tuple[list[str], str, datetime]], dict[str, datetime | None]]:
    """The bank's memories (for the reference) and the watermarks the pages take."""
    written = []

    def write(tags: list[str], fact_type: str, bank: str = BANK) -> datetime:
        unit = make_memory(bank, f"{fact_type} {tags}", tags=tags, fact_type=fact_type)
        if bank == BANK:
            written.append((tags, fact_type, unit.updated_at))
        return unit.updated_at

    for tags, fact_type in itertools.product(
            ([], ["team"], ["ops"], ["team", "ops"], ["ops", "eng"]), ("world", "observation")):
        mid = write(tags, fact_type)
    early = write(["team"], "world")
    write([], "observation")
    last = write(["ops", "eng"], "observation")
    # Newest of all, in another bank: a probe that forgot its bank would see it.
    write(["team", "ops"], "world", bank="kb-stale-other")
    return written, {"never": None, "mid": mid, "early": early, "last": last}


def _scopes() -> list[tuple[tuple[str, ...], dict[str, Any]]]:
    flat = [(tags, trigger_normalize({"tags_match": mode, "fact_types": fact_types}))
            for tags, mode, fact_types in itertools.product(FLAT_TAGS, MODES, FACT_TYPES)]
    grouped = [(("team",), trigger_normalize({"tag_groups": groups, "fact_types": fact_types}))
               for groups, fact_types in itertools.product(GROUPS, FACT_TYPES[:2])]
    return flat + grouped


@pytest.mark.parametrize("grouped", [True, False], ids=["bank read grouped", "probed per scope"])
def test_the_trees_flags_are_the_rule_asked_page_by_page_and_the_independent_reference(
        grouped, monkeypatch):
    # Many scopes over a few memories: the bank is read once, grouped (tagscope._grouped_banks),
    # unless the threshold says otherwise.
    if not grouped:
        monkeypatch.setattr(tagscope, "SETWISE_SCOPES", 10**6)
    make_bank(BANK)
    make_bank("kb-stale-other")
    memories, watermarks = _memories()
    pages: dict[str, MentalModel] = {}
    # Every other scope has no never-refreshed page: its probe starts at its pages' earliest
    # watermark, not at the beginning of the bank.
    spread = [(scope, item) for i, scope in enumerate(_scopes()) for item in watermarks.items()
              if i % 2 == 0 or item[0] != "never"]
    for n, ((tags, trigger), (when, watermark)) in enumerate(spread):
        model = MentalModel.objects.create(
            bank_id=BANK, mental_model_id=f"p{n}", name=f"P{n}", source_query="q?",
            tags=list(tags), trigger=trigger, last_refreshed_at=watermark,
            last_memory_seen_at=watermark)
        node = KnowledgeNode.objects.create(id=f"kp-{n:032x}", bank_id=BANK, kind=NodeKind.PAGE,
                                            name=f"{when} {n}", mental_model=model)
        pages[node.id] = model

    with CaptureQueriesContext(connection) as captured:
        tree = knowledge_tree(bank_id=BANK)
    # The nodes, the bank's directive change stamps, then one probe statement for every
    # distinct scope (after the count of the range a grouped read reads).
    assert len(captured) == (4 if grouped else 3)
    assert ("GROUP BY m.tags, m.fact_type" in captured[-1]["sql"]) is grouped

    one_at_a_time = {node_id: stale_flags([model])[model.uid] for node_id, model in pages.items()}
    reference = {
        node_id: reference_stale({"tags": model.tags, "trigger": model.trigger,
                                  "watermark": model.last_memory_seen_at}, memories)
        for node_id, model in pages.items()
    }
    assert tree.stale == reference
    assert one_at_a_time == reference
    # The mental-model list's batch (every model in one call) is the same function.
    batched = stale_flags(list(MentalModel.objects.filter(bank_id=BANK)))
    assert {node_id: batched[model.uid] for node_id, model in pages.items()} == reference

    # The grid tells scopes apart: past the middle watermark some pages are stale and some not.
    by_when: dict[str, set[bool]] = {}
    for node_id, model in pages.items():
        when = next(w for w, stamp in watermarks.items() if stamp == model.last_memory_seen_at)
        by_when.setdefault(when, set()).add(reference[node_id])
    assert by_when == {"never": {True, False}, "mid": {True, False}, "early": {True, False},
                       "last": {False}}

    # And the HTTP tree renders those flags.
    body = APIClient().get(f"/v1/default/banks/{BANK}/knowledge-base/tree").json()
    assert {n["id"]: n["is_stale"] for n in body["roots"]} == reference
