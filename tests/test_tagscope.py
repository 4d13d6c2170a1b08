"""The tag-scope compiler against a plain-Python reference of the tag-matching rules (``hindsight.infra.tagscope``).

A fixed pool of memories (every subset of four tags × every fact type, in two banks, with
distinct ``updated_at``) is inserted once per test; hypothesis then draws many scopes and
checks the SQL answer against the reference, for recall and for the staleness variant.
"""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import HealthCheck, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from hindsight.banks.models import Bank, MemoryUnit
from hindsight.infra.errors import FieldError
from hindsight.infra.tagscope import TagScope, any_newer_batch, matches, scope_sql
from hindsight.infra.vocabulary import TAGS_MATCH_MODES

POOL_TAGS = ("a", "b", "c", "d")
# "e" is never on a memory: scopes that ask for it must behave too.
QUERY_TAGS = ("a", "b", "c", "d", "e")
FACT_TYPES = ("world", "experience", "observation")
BASE = datetime(2026, 1, 1, tzinfo=UTC)


# --- the reference: the semantics table, written out literally -------------------------------


def ref_leaf(mem: frozenset[str], tags: frozenset[str], mode: str) -> bool:
    if not tags:
        return not mem if mode == "exact" else True
    if mode == "any":
        return not mem or bool(mem & tags)
    if mode == "all":
        return not mem or tags <= mem
    if mode == "any_strict":
        return bool(mem & tags)
    if mode == "all_strict":
        return bool(mem) and tags <= mem
    assert mode == "exact"
    return mem == tags


def ref_group(mem: frozenset[str], group: dict[str, Any], *, strict: bool) -> bool:
    if "and" in group:
        return all(ref_group(mem, g, strict=strict) for g in group["and"])
    if "or" in group:
        return any(ref_group(mem, g, strict=strict) for g in group["or"])
    if "not" in group:
        return not ref_group(mem, group["not"], strict=strict)
    mode = group.get("match", "any_strict")
    if strict:
        mode = {"any": "any_strict", "all": "all_strict"}.get(mode, mode)
    return ref_leaf(mem, frozenset(group["tags"]), mode)


def ref_in_scope(
    mem_tags: frozenset[str], fact_type: str, raw: dict[str, Any], *, staleness: bool
) -> bool:
    if raw["fact_types"] is not None and fact_type not in raw["fact_types"]:
        return False

    def evaluate(strict: bool) -> bool:
        if raw["tag_groups"]:
            return all(ref_group(mem_tags, g, strict=strict) for g in raw["tag_groups"])
        mode = raw["tags_match"]
        if strict:
            mode = {"any": "any_strict", "all": "all_strict"}.get(mode, mode)
        return ref_leaf(mem_tags, frozenset(raw["tags"] or []), mode)

    # Staleness: untagged memories stop counting under any/all unless selected explicitly;
    # it never counts what the recall scope itself would not read.
    return evaluate(False) and (evaluate(True) if staleness else True)


# --- strategies ------------------------------------------------------------------------------

tag_lists = st.lists(st.sampled_from(QUERY_TAGS), max_size=3, unique=True)
leaves = st.builds(
    lambda tags, match: {"tags": tags, "match": match} if match else {"tags": tags},
    tag_lists,
    st.one_of(st.none(), st.sampled_from(TAGS_MATCH_MODES)),
)
groups = st.recursive(
    leaves,
    lambda inner: st.one_of(
        st.builds(lambda xs: {"and": xs}, st.lists(inner, max_size=3)),
        st.builds(lambda xs: {"or": xs}, st.lists(inner, max_size=3)),
        st.builds(lambda x: {"not": x}, inner),
    ),
    max_leaves=6,
)
raw_scopes = st.fixed_dictionaries(
    {
        "tags": st.one_of(st.none(), tag_lists),
        "tags_match": st.sampled_from(TAGS_MATCH_MODES),
        "tag_groups": st.one_of(st.none(), st.lists(groups, min_size=1, max_size=3)),
        "fact_types": st.one_of(
            st.none(), st.lists(st.sampled_from(FACT_TYPES), min_size=1, max_size=3, unique=True)
        ),
    }
)


@pytest.fixture
def pool(db: None) -> list[dict[str, Any]]:
    """Every subset of POOL_TAGS × every fact type, in two banks, with distinct stamps."""
    rows = []
    for bank_id in ("b1", "b2"):
        Bank.objects.create(id=bank_id)
    subsets = [
        frozenset(c) for n in range(len(POOL_TAGS) + 1) for c in itertools.combinations(POOL_TAGS, n)
    ]
    # Interleave stamps so banks, tags and types are not ordered by time.
    combos = list(itertools.product(("b1", "b2"), subsets, FACT_TYPES))
    order = sorted(range(len(combos)), key=lambda i: (i * 37) % len(combos))
    units = []
    for rank, index in enumerate(order):
        bank_id, tags, fact_type = combos[index]
        stamp = BASE + timedelta(seconds=rank)
        units.append(
            MemoryUnit(
                bank_id=bank_id, text=f"m{rank}", fact_type=fact_type, tags=sorted(tags),
                updated_at=stamp, created_at=stamp,
            )
        )
        rows.append({"bank": bank_id, "tags": tags, "fact_type": fact_type, "updated_at": stamp})
    created = MemoryUnit.objects.bulk_create(units)
    for row, unit in zip(rows, created):
        row["id"] = unit.id
    return rows


def _sql_ids(bank_id: str, scope: TagScope, *, staleness: bool) -> set[Any]:
    from django.db import connection

    where, params = scope_sql(scope, alias="m", staleness=staleness)
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT m.id FROM banks_memoryunit m WHERE m.bank_id = %s AND {where}",
            [bank_id, *params],
        )
        return {row[0] for row in cursor.fetchall()}


def test_scope_sql_matches_reference_for_recall_and_staleness(pool: list[dict[str, Any]]) -> None:
    @hsettings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))
    @given(raw=raw_scopes)
    def check(raw: dict[str, Any]) -> None:
        scope = TagScope.parse(**raw)
        for staleness in (False, True):
            expected = {
                r["id"]
                for r in pool
                if r["bank"] == "b1"
                and ref_in_scope(r["tags"], r["fact_type"], raw, staleness=staleness)
            }
            assert _sql_ids("b1", scope, staleness=staleness) == expected, (raw, staleness)
            # The Python evaluator agrees with the SQL too (same rule, no database).
            assert {
                r["id"] for r in pool
                if r["bank"] == "b1"
                and matches(scope, r["tags"], r["fact_type"], staleness=staleness)
            } == expected

    check()


def test_any_newer_batch_matches_reference_in_one_query(
    pool: list[dict[str, Any]], django_assert_num_queries: Any
) -> None:
    stamps = sorted({r["updated_at"] for r in pool})
    watermarks = st.one_of(st.none(), st.sampled_from(stamps))

    @hsettings(max_examples=120, deadline=None, suppress_health_check=list(HealthCheck))
    @given(
        batch=st.lists(
            st.tuples(st.sampled_from(("b1", "b2", "nobank")), raw_scopes, watermarks),
            min_size=1, max_size=8,
        ),
        cutoff=watermarks,
    )
    def check(batch: list[tuple[str, dict[str, Any], datetime | None]], cutoff: datetime | None) -> None:
        items = [(i, bank, TagScope.parse(**raw), wm) for i, (bank, raw, wm) in enumerate(batch)]
        expected = {
            i
            for i, (bank, raw, wm) in enumerate(batch)
            if any(
                r["bank"] == bank
                and (wm is None or r["updated_at"] > wm)
                and (cutoff is None or r["updated_at"] <= cutoff)
                and ref_in_scope(r["tags"], r["fact_type"], raw, staleness=True)
                for r in pool
            )
        }
        with django_assert_num_queries(1):
            got = any_newer_batch(items, cutoff=cutoff)
        assert got == expected, (batch, cutoff)

    check()


def test_any_newer_batch_probes_once_per_scope_whatever_the_watermarks(
    pool: list[dict[str, Any]], django_assert_num_queries: Any
) -> None:
    """A list page: many models of few scopes, each with its own watermark — one probe per
    (bank, scope), and each key still judged against its own watermark."""
    stamps = sorted({r["updated_at"] for r in pool})
    few_scopes = [
        {"tags": [QUERY_TAGS[0]], "tags_match": "any", "tag_groups": None, "fact_types": None},
        {"tags": list(QUERY_TAGS[:2]), "tags_match": "all_strict", "tag_groups": None, "fact_types": None},
    ]

    @hsettings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
    @given(batch=st.lists(
        st.tuples(st.sampled_from(("b1", "b2")), st.sampled_from((0, 1)),
                  st.one_of(st.none(), st.sampled_from(stamps))),
        min_size=1, max_size=30,
    ))
    def check(batch: list[tuple[str, int, datetime | None]]) -> None:
        items = [(i, bank, TagScope.parse(**few_scopes[s]), wm) for i, (bank, s, wm) in enumerate(batch)]
        expected = {
            i for i, (bank, s, wm) in enumerate(batch)
            if any(r["bank"] == bank and (wm is None or r["updated_at"] > wm)
                   and ref_in_scope(r["tags"], r["fact_type"], few_scopes[s], staleness=True)
                   for r in pool)
        }
        with django_assert_num_queries(1) as captured:
            got = any_newer_batch(items)
        assert got == expected, batch
        probes = len({(bank, s) for bank, s, _ in batch})
        assert captured.captured_queries[0]["sql"].count("UNION ALL") == probes - 1

    check()


def _spellings(raw: dict[str, Any]) -> list[dict[str, Any]]:
    """Ways of writing the flat scope ``raw`` that select the same memories for staleness:
    tags and fact types in another order, any/any_strict, all/all_strict, and with one tag or
    none, any of the four."""
    tags = list(raw["tags"] or [])
    mode = raw["tags_match"]
    if mode == "exact":
        modes: tuple[str, ...] = ("exact",)
    elif len(tags) <= 1:
        modes = ("any", "all", "any_strict", "all_strict")
    else:
        modes = ("any", "any_strict") if mode.startswith("any") else ("all", "all_strict")
    fact_types = raw["fact_types"]
    return [
        {"tags": tags[::-1] if i % 2 else tags, "tags_match": m, "tag_groups": None,
         "fact_types": fact_types[::-1] if fact_types and i % 2 else fact_types}
        for i, m in enumerate(modes)
    ]


def test_any_newer_batch_probes_once_per_staleness_scope_however_it_is_written(
    pool: list[dict[str, Any]], django_assert_num_queries: Any
) -> None:
    """A page's models name one scope in several ways: one probe, each key judged by its own
    spelling and watermark (the reference knows nothing of the shared form)."""
    stamps = sorted({r["updated_at"] for r in pool})
    flat = raw_scopes.map(lambda raw: {**raw, "tag_groups": None})

    @hsettings(max_examples=120, deadline=None, suppress_health_check=list(HealthCheck))
    @given(raw=flat, watermarks=st.lists(st.one_of(st.none(), st.sampled_from(stamps)),
                                         min_size=4, max_size=4))
    def check(raw: dict[str, Any], watermarks: list[datetime | None]) -> None:
        spellings = _spellings(raw)
        batch = [(s, wm) for s in spellings for wm in watermarks]
        items = [(i, "b1", TagScope.parse(**s), wm) for i, (s, wm) in enumerate(batch)]
        expected = {
            i for i, (s, wm) in enumerate(batch)
            if any(r["bank"] == "b1" and (wm is None or r["updated_at"] > wm)
                   and ref_in_scope(r["tags"], r["fact_type"], s, staleness=True)
                   for r in pool)
        }
        with django_assert_num_queries(1) as captured:
            got = any_newer_batch(items)
        assert got == expected, batch
        assert "UNION ALL" not in captured.captured_queries[0]["sql"]

    check()


def test_any_newer_batch_of_nothing_runs_no_query(db: None, django_assert_num_queries: Any) -> None:
    with django_assert_num_queries(0):
        assert any_newer_batch([]) == set()


def test_untagged_write_does_not_make_an_any_scope_stale_but_is_read(pool: list[dict[str, Any]]) -> None:
    scope = TagScope(tags=("a",), tags_match="any")
    untagged = {r["id"] for r in pool if r["bank"] == "b1" and not r["tags"]}
    assert untagged <= _sql_ids("b1", scope, staleness=False)
    assert not untagged & _sql_ids("b1", scope, staleness=True)


def test_exact_with_no_tags_selects_only_untagged_in_both_variants(pool: list[dict[str, Any]]) -> None:
    scope = TagScope(tags=(), tags_match="exact")
    untagged = {r["id"] for r in pool if r["bank"] == "b1" and not r["tags"]}
    assert _sql_ids("b1", scope, staleness=False) == untagged
    assert _sql_ids("b1", scope, staleness=True) == untagged


def test_not_group_counts_untagged_for_staleness(pool: list[dict[str, Any]]) -> None:
    scope = TagScope.parse(tag_groups=[{"not": {"tags": ["a"]}}])
    untagged = {r["id"] for r in pool if r["bank"] == "b1" and not r["tags"]}
    assert untagged <= _sql_ids("b1", scope, staleness=True)


def test_groups_override_flat_tags(pool: list[dict[str, Any]]) -> None:
    scope = TagScope.parse(tags=["a"], tags_match="exact", tag_groups=[{"tags": ["b"]}])
    ids = _sql_ids("b1", scope, staleness=False)
    assert ids == {r["id"] for r in pool if r["bank"] == "b1" and "b" in r["tags"]}


@pytest.mark.parametrize(
    ("kwargs", "loc", "needle"),
    [
        ({"tags_match": "some"}, ["body", "tags_match"], "must be one of"),
        ({"tags": "a"}, ["body", "tags"], "list of strings"),
        ({"tags": ["a", 3]}, ["body", "tags", 1], "must be a string"),
        ({"fact_types": []}, ["body", "fact_types"], "must not be empty"),
        ({"fact_types": ["fact"]}, ["body", "fact_types", 0], "must be one of"),
        ({"tag_groups": {"tags": ["a"]}}, ["body", "tag_groups"], "list of tag groups"),
        ({"tag_groups": [{"tags": ["a"], "match": "most"}]}, ["body", "tag_groups", 0, "match"],
         "must be one of"),
        ({"tag_groups": [{"match": "any"}]}, ["body", "tag_groups", 0, "tags"], "required"),
        ({"tag_groups": [{"tags": ["a"], "bogus": 1}]}, ["body", "tag_groups", 0, "bogus"],
         "unknown field"),
        ({"tag_groups": [{"and": [{"tags": ["a"]}], "or": []}]}, ["body", "tag_groups", 0],
         "exactly one key"),
        ({"tag_groups": [{"or": {"tags": ["a"]}}]}, ["body", "tag_groups", 0, "or"], "must be a list"),
        ({"tag_groups": [{"not": [{"tags": ["a"]}]}]}, ["body", "tag_groups", 0, "not"],
         "must be an object"),
        ({"tag_groups": [{"tags": ["a"], "resolve": "fuzzy"}]},
         ["body", "tag_groups", 0, "resolve"], "not supported"),
        ({"tag_groups": [5]}, ["body", "tag_groups", 0], "must be an object"),
    ],
)
def test_parse_rejects_malformed_input_naming_field_and_rule(
    kwargs: dict[str, Any], loc: list[Any], needle: str
) -> None:
    with pytest.raises(FieldError) as info:
        TagScope.parse(**kwargs)
    (error,) = info.value.errors
    assert error["loc"] == loc
    assert needle in str(error["msg"])


def test_parse_rejects_too_deep_nesting() -> None:
    group: dict[str, Any] = {"tags": ["a"]}
    for _ in range(20):
        group = {"not": group}
    with pytest.raises(FieldError, match="nest at most"):
        TagScope.parse(tag_groups=[group])


def test_scopes_are_hashable_and_roundtrip_to_json() -> None:
    raw = {"tags": ["x"], "tags_match": "all", "fact_types": ["world"],
           "tag_groups": [{"or": [{"tags": ["a"], "match": "any"}, {"not": {"tags": []}}]}]}
    scope = TagScope.parse(**raw)
    again = TagScope.parse(**scope.to_json())
    assert again == scope and hash(again) == hash(scope)
