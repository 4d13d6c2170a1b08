"""Staleness (docs/behaviour.md#staleness): one rule, checked against a plain-Python reference, in constant queries."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import HealthCheck, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from hindsight.banks.models import MemoryUnit
from mentalmodels.models import MentalModel
from mentalmodels.staleness import model_scope, stale_flags
from mentalmodels.triggers import trigger_normalize
from tests.factories import make_memory, make_mental_model

pytestmark = pytest.mark.django_db

TAGS = ["a", "b", "c"]
MODES = ["any", "all", "any_strict", "all_strict", "exact"]
FACT_TYPES = ["world", "experience", "observation"]


# ---- the reference: tag matching, scope and staleness written out independently -----------------


def _leaf(tags: list[str], match: str, mem: frozenset[str]) -> bool:
    wanted = set(tags)
    if not wanted:
        return not mem if match == "exact" else True
    if match == "any":
        return not mem or bool(mem & wanted)
    if match == "all":
        return not mem or wanted <= mem
    if match == "any_strict":
        return bool(mem & wanted)
    if match == "all_strict":
        return wanted <= mem
    return mem == wanted


def _group(group: dict, mem: frozenset[str], strict: bool) -> bool:
    if "and" in group:
        return all(_group(g, mem, strict) for g in group["and"])
    if "or" in group:
        return any(_group(g, mem, strict) for g in group["or"])
    if "not" in group:
        return not _group(group["not"], mem, strict)
    match = group.get("match") or "any_strict"
    if strict:
        match = {"any": "any_strict", "all": "all_strict"}.get(match, match)
    return _leaf(group["tags"], match, mem)


def reference_counts(model: dict, mem_tags: list[str], mem_type: str) -> bool:
    """Does this memory count for the model's staleness?"""
    trigger = model["trigger"]
    if trigger.get("fact_types") and mem_type not in trigger["fact_types"]:
        return False
    mem = frozenset(mem_tags)
    if trigger.get("tag_groups"):
        groups = trigger["tag_groups"]
    elif model["tags"]:
        groups = [{"tags": model["tags"], "match": trigger.get("tags_match") or "all_strict"}]
    else:
        mode = trigger.get("tags_match") or "any"
        groups = [{"tags": [], "match": mode}]
    # Staleness: in the scope the refresh reads AND in its strict version (untagged writes
    # never count under any/all unless selected explicitly).
    return all(_group(g, mem, False) for g in groups) and all(_group(g, mem, True) for g in groups)


def reference_stale(model: dict, memories: list[tuple[list[str], str, datetime]]) -> bool:
    watermark = model["watermark"]
    return any(
        reference_counts(model, tags, ftype) and (watermark is None or updated > watermark)
        for tags, ftype, updated in memories
    )


# ---- strategies --------------------------------------------------------------------------

tag_sets = st.lists(st.sampled_from(TAGS), unique=True, max_size=3)
leaves = st.fixed_dictionaries({"tags": tag_sets, "match": st.sampled_from(MODES)})
groups = st.recursive(
    leaves,
    lambda inner: st.one_of(
        st.fixed_dictionaries({"and": st.lists(inner, max_size=2)}),
        st.fixed_dictionaries({"or": st.lists(inner, max_size=2)}),
        st.fixed_dictionaries({"not": inner}),
    ),
    max_leaves=3,
)
triggers = st.fixed_dictionaries({
    "tags_match": st.one_of(st.none(), st.sampled_from(MODES)),
    "tag_groups": st.one_of(st.none(), st.lists(groups, min_size=1, max_size=2)),
    "fact_types": st.one_of(
        st.none(), st.lists(st.sampled_from(FACT_TYPES), min_size=1, max_size=3, unique=True)
    ),
})


@pytest.fixture
def pool(bank):
    """A fixed pool of memories (random tags and types, seeded), written once per test."""
    rng = random.Random(7)
    memories = []
    for index in range(24):
        tags = [t for t in TAGS if rng.random() < 0.35]
        ftype = rng.choice(FACT_TYPES)
        unit = make_memory(bank, f"memory {index}", tags=tags, fact_type=ftype)
        memories.append((tags, ftype, unit.updated_at))
    return memories


@hsettings(max_examples=150, deadline=None,
           suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(data=st.data())
def test_is_stale_matches_the_reference_for_random_scopes_and_watermarks(api, bank, pool, data):
    stamps = sorted({u for _, _, u in pool})
    specs = []
    for index in range(data.draw(st.integers(1, 4))):
        tags = data.draw(tag_sets)
        trigger = trigger_normalize(data.draw(triggers))
        choice = data.draw(st.integers(-1, len(stamps)))
        if choice == -1:
            watermark = None
        elif choice == len(stamps):
            watermark = stamps[-1] + timedelta(seconds=1)
        else:
            watermark = stamps[choice]
        specs.append({"id": f"m{index}", "tags": tags, "trigger": trigger, "watermark": watermark})
    MentalModel.objects.filter(bank=bank).delete()
    for spec in specs:
        make_mental_model(bank, spec["id"], tags=spec["tags"], trigger=spec["trigger"],
                  last_memory_seen_at=spec["watermark"])
    expected = {spec["id"]: reference_stale(spec, pool) for spec in specs}

    listed = api.get(f"/v1/default/banks/{bank.id}/mental-models?detail=metadata").json()["items"]
    assert {i["id"]: i["is_stale"] for i in listed} == expected
    probe = data.draw(st.sampled_from(specs))
    got = api.get(f"/v1/default/banks/{bank.id}/mental-models/{probe['id']}?detail=metadata").json()
    assert got["is_stale"] is expected[probe["id"]]


def test_untagged_writes_never_make_a_tagged_model_stale(bank):
    make_memory(bank, "tagged", tags=["team"])
    models = [
        make_mental_model(bank, f"m-{mode}", tags=["team"], trigger={"tags_match": mode})
        for mode in ("any", "all", "any_strict", "all_strict")
    ]
    untagged_model = make_mental_model(bank, "whole-bank")
    for model in models + [untagged_model]:
        model.last_memory_seen_at = MemoryUnit.objects.get().updated_at
        model.save()
    make_memory(bank, "untagged write")
    flags = stale_flags(MentalModel.objects.all())
    assert {m.mental_model_id: flags[m.uid] for m in MentalModel.objects.all()} == {
        "m-any": False, "m-all": False, "m-any_strict": False, "m-all_strict": False,
        "whole-bank": True,
    }


def test_tagged_model_defaults_to_all_strict_and_untagged_reads_the_whole_bank(bank):
    tagged = make_mental_model(bank, "tagged", tags=["a", "b"])
    untagged = make_mental_model(bank, "untagged")
    assert model_scope(tagged).tags_match == "all_strict"
    assert model_scope(untagged).tags == () and model_scope(untagged).tags_match == "any"
    make_memory(bank, "only a", tags=["a"])
    flags = stale_flags([tagged, untagged])
    assert flags == {tagged.uid: False, untagged.uid: True}
    make_memory(bank, "a and b and c", tags=["a", "b", "c"])
    assert stale_flags([tagged])[tagged.uid] is True


def test_memory_at_the_watermark_is_not_newer(bank):
    unit = make_memory(bank, "x")
    model = make_mental_model(bank, "m", last_memory_seen_at=unit.updated_at)
    assert stale_flags([model]) == {model.uid: False}


def test_bank_watermark_shortcut_answers_without_a_scope_query(bank, django_assert_num_queries):
    unit = make_memory(bank, "x")
    model = make_mental_model(bank, "m", last_memory_seen_at=unit.updated_at + timedelta(seconds=1))
    with django_assert_num_queries(2):  # the bank's last write and directive stamps only
        assert stale_flags([model]) == {model.uid: False}


def _bulk_models(bank, n: int, watermark: datetime | None) -> None:
    rng = random.Random(n)
    MentalModel.objects.bulk_create([
        MentalModel(
            bank=bank, mental_model_id=f"m{i:04d}", name=f"m{i}", source_query="q",
            tags=[t for t in TAGS if rng.random() < 0.5],
            trigger=trigger_normalize({"tags_match": rng.choice(MODES)}),
            last_memory_seen_at=None if i % 3 == 0 else watermark,
        )
        for i in range(n)
    ])


@pytest.mark.parametrize("page_size", [1, 500])
def test_list_computes_every_flag_in_a_constant_number_of_queries(
    api, bank, page_size, django_assert_max_num_queries
):
    for index in range(5):
        make_memory(bank, f"m{index}", tags=[TAGS[index % 3]])
    middle = datetime.now(UTC) - timedelta(days=1)
    _bulk_models(bank, page_size, middle)
    # The page with its total and the bank's last write, the bank's directive stamps, one
    # batched scope query.
    with django_assert_max_num_queries(3):
        body = api.get(f"/v1/default/banks/{bank.id}/mental-models?limit={page_size}").json()
    assert len(body["items"]) == page_size
    assert all(isinstance(i["is_stale"], bool) for i in body["items"])


def test_list_of_models_the_bank_watermark_settles_needs_no_scope_query(
    api, bank, django_assert_num_queries
):
    make_memory(bank, "x", tags=["a"])
    for index in range(3):
        make_mental_model(bank, f"m{index}", tags=["a"], fresh=True)
    # The page reads the bank's last write with it, then the directive stamps; no watermark is
    # older, so no scope query.
    with django_assert_num_queries(2):
        body = api.get(f"/v1/default/banks/{bank.id}/mental-models").json()
    assert [i["is_stale"] for i in body["items"]] == [False, False, False]
