"""The one tag-scope compiler: ``tags``/``tags_match``/``tag_groups``/``fact_types`` → SQL.

Recall, reflect, staleness, refresh and the triggers all resolve "which memories are in scope"
here and nowhere else. This module owns:

* ``TagScope``: a validated, hashable scope (``TagScope.parse`` checks raw request input and
  raises ``FieldError`` naming the field and the rule);
* ``scope_sql``: the scope as a WHERE fragment over ``banks_memoryunit`` columns;
  ``filters_tags``: whether that fragment reads the tags at all;
* ``rule_applies`` / ``rule_scope_sql``: whether a bank-wide rule (a directive), global when
  untagged, applies to a request's scope;
* ``any_newer_batch``: "does scope S hold a memory newer than W, or did a memory of S change
  after W" for many (S, W) pairs in one query, one probe per distinct scope (the staleness
  check of a whole list page), over a bank's memories grouped by (tags, fact type) when it is
  asked for many scopes.

Semantics, for a memory with tag set ``M`` and requested ``T``:

==============  ======================  ==================
mode            memory matches when     untagged memories
==============  ======================  ==================
``any``         ``M ∩ T ≠ ∅``           included
``all``         ``T ⊆ M``               included
``any_strict``  ``M ∩ T ≠ ∅``           excluded
``all_strict``  ``T ⊆ M``               excluded
``exact``       ``M = T``               excluded; ``T = ∅`` selects untagged only
==============  ======================  ==================

No tags requested means no filter, except under ``exact`` (the same holds for a leaf of
``tag_groups`` whose ``tags`` is empty). ``tag_groups`` is a list of groups AND-ed together; a
group is a leaf ``{tags, match}`` (match default ``any_strict``) or ``{and: [...]}``,
``{or: [...]}``, ``{not: {...}}``; ``{and: []}`` is true and ``{or: []}`` is false. Non-empty
groups override the flat tags.

The **staleness** variant: untagged memories never count under ``any``/``all`` (flat, or in a
leaf), unless the scope selects them explicitly — an ``exact`` leaf with no tags, or a ``not``
over a strict leaf. Precisely: a memory counts for staleness when it is in the recall scope AND
in the scope obtained by replacing every ``any``/``all`` with ``any_strict``/``all_strict``. On
a tagged memory both are the same, so the variant only ever drops untagged memories, and it
never counts a memory the refresh itself would not read.

How it compiles: on a tagged memory ``any`` ≡ ``any_strict`` and ``all`` ≡ ``all_strict``, and on
an untagged memory every leaf is a constant. So a scope compiles to one tag expression over
tagged memories (array operators ``&&``, ``@>``, ``<@`` the GIN index on ``tags`` serves) plus a
boolean computed in Python saying whether untagged memories are in.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeVar

from django.db import connections

from hindsight.infra.errors import FieldError
from hindsight.infra.vocabulary import LEGACY_FACT_TYPES, SCOPE_FACT_TYPES, TAGS_MATCH_MODES

MAX_GROUP_DEPTH = 12
MAX_GROUP_NODES = 256
MAX_TAGS = 256
# Characters per tag: 4 bytes each at most in UTF-8, so a tag always fits one entry of the GIN
# indexes on ``tags`` (PostgreSQL refuses entries over 2712 bytes, which would be a 500).
MAX_TAG_LENGTH = 512

_STRICT = {"any": "any_strict", "all": "all_strict"}

Loc = tuple[str | int, ...]
K = TypeVar("K", bound=Hashable)


@dataclass(frozen=True)
class Leaf:
    tags: tuple[str, ...]
    match: str = "any_strict"

    def to_json(self) -> dict[str, Any]:
        return {"tags": list(self.tags), "match": self.match}


@dataclass(frozen=True)
class And:
    children: tuple[Group, ...]

    def to_json(self) -> dict[str, Any]:
        return {"and": [c.to_json() for c in self.children]}


@dataclass(frozen=True)
class Or:
    children: tuple[Group, ...]

    def to_json(self) -> dict[str, Any]:
        return {"or": [c.to_json() for c in self.children]}


@dataclass(frozen=True)
class Not:
    child: Group

    def to_json(self) -> dict[str, Any]:
        return {"not": self.child.to_json()}


Group = Leaf | And | Or | Not


@dataclass(frozen=True)
class TagScope:
    """A resolved memory scope. Hashable, so identical scopes can share one query."""

    tags: tuple[str, ...] = ()
    tags_match: str = "any"
    tag_groups: tuple[Group, ...] | None = None
    fact_types: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        # Accept lists from callers that build scopes directly; keep the dataclass hashable.
        object.__setattr__(self, "tags", tuple(self.tags))
        if self.tags_match not in TAGS_MATCH_MODES:
            raise ValueError(f"tags_match must be one of {', '.join(TAGS_MATCH_MODES)}")
        if self.tag_groups is not None:
            groups = tuple(self.tag_groups)
            object.__setattr__(self, "tag_groups", groups or None)
        if self.fact_types is not None:
            object.__setattr__(self, "fact_types", tuple(self.fact_types))

    @classmethod
    def parse(
        cls,
        *,
        tags: Any = None,
        tags_match: Any = None,
        tag_groups: Any = None,
        fact_types: Any = None,
        loc: Loc = ("body",),
        default_tags_match: str = "any",
        fact_types_key: str = "fact_types",
    ) -> TagScope:
        """Validate raw (JSON) input; every problem is a ``FieldError`` naming field and rule.

        ``fact_types_key`` is the name the caller's wire format gives the fact types (recall
        calls them ``types``), so errors name the field the client sent.
        """
        return cls(
            tags=parse_tags(tags, loc=(*loc, "tags")),
            tags_match=parse_tags_match(
                tags_match, loc=(*loc, "tags_match"), default=default_tags_match
            ),
            tag_groups=parse_tag_groups(tag_groups, loc=(*loc, "tag_groups")),
            fact_types=parse_fact_types(fact_types, loc=(*loc, fact_types_key)),
        )

    @property
    def uses_groups(self) -> bool:
        return self.tag_groups is not None

    def tag_groups_json(self) -> list[dict[str, Any]] | None:
        return None if self.tag_groups is None else [g.to_json() for g in self.tag_groups]

    def to_json(self) -> dict[str, Any]:
        return {
            "tags": list(self.tags),
            "tags_match": self.tags_match,
            "tag_groups": self.tag_groups_json(),
            "fact_types": None if self.fact_types is None else list(self.fact_types),
        }


# ---------------------------------------------------------------------------------------------
# Input validation


def parse_tags(value: Any, *, loc: Loc) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list):
        raise FieldError(loc, "must be a list of strings or null", "list_type")
    if len(value) > MAX_TAGS:
        raise FieldError(loc, f"at most {MAX_TAGS} tags", "too_long")
    for index, tag in enumerate(value):
        if not isinstance(tag, str):
            raise FieldError((*loc, index), "a tag must be a string", "string_type")
        if "\x00" in tag:
            raise FieldError((*loc, index), "Null characters are not allowed.",
                             "null_characters_not_allowed")
        if len(tag) > MAX_TAG_LENGTH:
            raise FieldError((*loc, index), f"a tag has at most {MAX_TAG_LENGTH} characters",
                             "string_too_long")
    # Order and duplicates carry no meaning: tags are a set.
    return tuple(dict.fromkeys(value))


def parse_tags_match(value: Any, *, loc: Loc, default: str = "any") -> str:
    if value is None:
        return default
    if not isinstance(value, str) or value not in TAGS_MATCH_MODES:
        raise FieldError(
            loc, f"must be one of {', '.join(TAGS_MATCH_MODES)}; got {value!r}", "literal_error"
        )
    return value


def parse_fact_types(value: Any, *, loc: Loc) -> tuple[str, ...] | None:
    if value is None:
        return None
    if not isinstance(value, list):
        raise FieldError(loc, "must be a list of fact types or null", "list_type")
    if not value:
        raise FieldError(
            loc, f"must not be empty: omit it or name some of {', '.join(SCOPE_FACT_TYPES)}"
        )
    allowed = SCOPE_FACT_TYPES + LEGACY_FACT_TYPES
    for index, item in enumerate(value):
        if not isinstance(item, str) or item not in allowed:
            raise FieldError(
                (*loc, index),
                f"must be one of {', '.join(SCOPE_FACT_TYPES)}; got {item!r}",
                "literal_error",
            )
    return tuple(dict.fromkeys(value))


def parse_tag_groups(value: Any, *, loc: Loc) -> tuple[Group, ...] | None:
    if value is None:
        return None
    if not isinstance(value, list):
        raise FieldError(loc, "must be a list of tag groups or null", "list_type")
    counter = [0]
    groups = tuple(
        _parse_group(item, loc=(*loc, index), depth=1, counter=counter)
        for index, item in enumerate(value)
    )
    return groups or None


def _parse_group(value: Any, *, loc: Loc, depth: int, counter: list[int]) -> Group:
    counter[0] += 1
    if counter[0] > MAX_GROUP_NODES:
        raise FieldError(loc, f"tag_groups may hold at most {MAX_GROUP_NODES} groups in all")
    if depth > MAX_GROUP_DEPTH:
        raise FieldError(loc, f"tag_groups may nest at most {MAX_GROUP_DEPTH} levels")
    if not isinstance(value, Mapping):
        raise FieldError(
            loc, "a tag group must be an object: {tags, match}, {and: [...]}, {or: [...]} "
            "or {not: {...}}", "dict_type"
        )
    keys = set(value)
    compound = keys & {"and", "or", "not"}
    if compound:
        if len(keys) != 1:
            raise FieldError(
                loc, f"a compound group has exactly one key (and, or, not); got {sorted(keys)}"
            )
        (key,) = compound
        inner = value[key]
        if key == "not":
            return Not(_parse_group(inner, loc=(*loc, "not"), depth=depth + 1, counter=counter))
        if not isinstance(inner, list):
            raise FieldError((*loc, key), f"'{key}' must be a list of tag groups", "list_type")
        children = tuple(
            _parse_group(item, loc=(*loc, key, index), depth=depth + 1, counter=counter)
            for index, item in enumerate(inner)
        )
        return And(children) if key == "and" else Or(children)
    unknown = keys - {"tags", "match", "resolve"}
    if unknown:
        raise FieldError(
            (*loc, sorted(unknown)[0]),
            f"unknown field(s) {sorted(unknown)} in a tag group leaf (allowed: tags, match, "
            "resolve)", "extra_forbidden",
        )
    if "tags" not in value:
        raise FieldError((*loc, "tags"), "Field required", "missing")
    if value["tags"] is None:
        raise FieldError((*loc, "tags"), "must be a list of strings", "list_type")
    tags = parse_tags(value["tags"], loc=(*loc, "tags"))
    match = parse_tags_match(value.get("match"), loc=(*loc, "match"), default="any_strict")
    resolve = value.get("resolve")
    if resolve not in (None, "exact"):
        if resolve == "fuzzy":
            raise FieldError(
                (*loc, "resolve"), "resolve 'fuzzy' is not supported here: use 'exact'"
            )
        raise FieldError((*loc, "resolve"), "must be 'exact'", "literal_error")
    return Leaf(tags=tags, match=match)


# ---------------------------------------------------------------------------------------------
# Compilation


def _untagged_leaf(leaf: Leaf, *, strict: bool) -> bool:
    """Whether an untagged memory matches ``leaf`` (a constant: its tag set is empty)."""
    match = _STRICT.get(leaf.match, leaf.match) if strict else leaf.match
    if not leaf.tags:
        # Either no filter at all, or exact-empty, which selects exactly the untagged.
        return True
    return match in ("any", "all")


def _untagged(group: Group, *, strict: bool) -> bool:
    if isinstance(group, Leaf):
        return _untagged_leaf(group, strict=strict)
    if isinstance(group, And):
        return all(_untagged(c, strict=strict) for c in group.children)
    if isinstance(group, Or):
        return any(_untagged(c, strict=strict) for c in group.children)
    return not _untagged(group.child, strict=strict)


def _tagged_leaf_sql(leaf: Leaf, col: str) -> tuple[str, list[Any]]:
    """The leaf over a memory known to carry at least one tag (any ≡ any_strict there)."""
    if not leaf.tags:
        # No filter, except exact-empty, which selects untagged memories only.
        return ("FALSE", []) if leaf.match == "exact" else ("TRUE", [])
    tags = list(leaf.tags)
    if leaf.match in ("any", "any_strict"):
        return f"{col} && %s::text[]", [tags]
    if leaf.match in ("all", "all_strict"):
        return f"{col} @> %s::text[]", [tags]
    return f"({col} @> %s::text[] AND {col} <@ %s::text[])", [tags, tags]


def _tagged_sql(group: Group, col: str) -> tuple[str, list[Any]]:
    if isinstance(group, Leaf):
        return _tagged_leaf_sql(group, col)
    if isinstance(group, Not):
        sql, params = _tagged_sql(group.child, col)
        return f"(NOT {sql})", params
    pieces = [_tagged_sql(c, col) for c in group.children]
    if not pieces:
        return ("TRUE", []) if isinstance(group, And) else ("FALSE", [])
    joiner = " AND " if isinstance(group, And) else " OR "
    return (
        "(" + joiner.join(sql for sql, _ in pieces) + ")",
        [p for _, params in pieces for p in params],
    )


def _groups(scope: TagScope) -> tuple[Group, ...]:
    """The scope's tag filter as groups: explicit groups, else the flat tags as one leaf."""
    if scope.tag_groups is not None:
        return scope.tag_groups
    if not scope.tags and scope.tags_match != "exact":
        return ()
    return (Leaf(tags=scope.tags, match=scope.tags_match),)


def includes_untagged(scope: TagScope, *, staleness: bool = False) -> bool:
    """Whether untagged memories (of the right fact type) are in ``scope``."""
    groups = _groups(scope)
    recall = all(_untagged(g, strict=False) for g in groups)
    if not staleness:
        return recall
    return recall and all(_untagged(g, strict=True) for g in groups)


def filters_tags(scope: TagScope) -> bool:
    """Whether ``scope_sql(scope)`` reads the tags column (else it reads at most the fact type)."""
    return bool(_groups(scope))


def rule_applies(scope: TagScope, tags: Iterable[str]) -> bool:
    """Whether a bank-wide rule tagged ``tags`` (a directive) applies to a request of ``scope``.

    An untagged rule always applies; a tagged one only when the request filters by tags and
    that filter selects the rule's tags, read as a memory's tags are (``tags_match`` and
    ``tag_groups`` as for memories). A request without a tag filter gets the untagged rules
    only, so a rule meant for one scope never leaks into every answer. Fact types do not
    concern rules.
    """
    tag_set = frozenset(tags)
    if not tag_set:
        return True
    groups = _groups(scope)
    return bool(groups) and all(_eval_tagged(g, tag_set) for g in groups)


def rule_scope_sql(scope: TagScope, *, alias: str) -> tuple[str, list[Any]]:
    """``rule_applies`` as a WHERE fragment over a table of rules with a ``tags`` column."""
    col = f"{alias}.tags"
    groups = _groups(scope)
    if not groups:
        return f"cardinality({col}) = 0", []
    pieces = [_tagged_sql(g, col) for g in groups]
    tagged = " AND ".join(sql for sql, _ in pieces)
    return (f"(cardinality({col}) = 0 OR ({tagged}))",
            [p for _, ps in pieces for p in ps])


def scope_sql(scope: TagScope, *, alias: str = "m", staleness: bool = False) -> tuple[str, list[Any]]:
    """``scope`` as a WHERE fragment over memory-unit columns of table alias ``alias``.

    Returns ``(sql, params)`` with ``%s`` placeholders (psycopg/Django cursor style). The
    fragment never mentions ``bank_id``: callers add their own bank and time conditions.
    """
    col = f"{alias}.tags"
    parts: list[str] = []
    params: list[Any] = []
    groups = _groups(scope)
    if groups:
        pieces = [_tagged_sql(g, col) for g in groups]
        tagged = " AND ".join(sql for sql, _ in pieces)
        tagged_params = [p for _, ps in pieces for p in ps]
        if includes_untagged(scope, staleness=staleness):
            parts.append(f"(cardinality({col}) = 0 OR ({tagged}))")
        else:
            parts.append(f"(cardinality({col}) > 0 AND ({tagged}))")
        params.extend(tagged_params)
    if scope.fact_types is not None:
        parts.append(f"{alias}.fact_type = ANY(%s::text[])")
        params.append(list(scope.fact_types))
    return (" AND ".join(parts) if parts else "TRUE"), params


# ``any_newer_batch`` reads a bank once, its memories grouped, instead of probing it per scope,
# when it is asked for more distinct scopes than SETWISE_SCOPES and holds fewer than
# SETWISE_ROWS_PER_SCOPE memories a scope in the range read. In bench/bench_knowledge.py (20,000
# memories a bank): 233 scopes took 37 ms grouped against 127 ms probed, 43 scopes 26 against
# 16: a probe costs ~0.3-0.4 ms, grouping ~1 µs a memory.
SETWISE_SCOPES = 24
SETWISE_ROWS_PER_SCOPE = 300


def _grouped_banks(
    groups: Mapping[tuple[str, TagScope], int], bounds: Sequence[datetime | None],
    cutoff: datetime | None, using: str,
) -> tuple[dict[str, str], list[str], list[Any]]:
    """The banks of ``groups`` to read grouped: ``{bank: CTE name}``, the CTEs and their
    parameters. Each CTE holds the bank's memories in the range its scopes read (after their
    earliest watermark, up to ``cutoff``) grouped by (tags, fact type), the newest stamp of
    each group as ``updated_at``: a bank holds a few hundred such combinations at most, and a
    probe over them, with the same conditions on the same columns, finds the newest memory in
    scope. A bank is read so only when it is asked for many scopes and the range holds few
    enough memories (one statement counts them, at most as many as would decide it, for every
    such bank)."""
    scopes_of: dict[str, int] = {}
    for bank_id, _ in groups:
        scopes_of[bank_id] = scopes_of.get(bank_id, 0) + 1
    ranges: dict[str, tuple[str, list[Any]]] = {}
    for bank_id, count in scopes_of.items():
        if count <= SETWISE_SCOPES:
            continue
        lows = [bounds[index] for (bank, _), index in groups.items() if bank == bank_id]
        conditions = ["m.bank_id = %s"]
        range_params: list[Any] = [bank_id]
        if None not in lows:
            conditions.append("m.updated_at > %s")
            range_params.append(min(low for low in lows if low is not None))
        if cutoff is not None:
            conditions.append("m.updated_at <= %s")
            range_params.append(cutoff)
        ranges[bank_id] = (" AND ".join(conditions), range_params)
    if not ranges:
        return {}, [], []
    counts: list[str] = []
    count_params: list[Any] = []
    for bank_id, (where, range_params) in ranges.items():
        counts.append(f"SELECT %s::text, count(*) FROM (SELECT 1 FROM banks_memoryunit m WHERE {where} "
                      f"LIMIT %s) AS r")
        count_params += [bank_id, *range_params, SETWISE_ROWS_PER_SCOPE * scopes_of[bank_id]]
    with connections[using].cursor() as cursor:
        cursor.execute(" UNION ALL ".join(counts), count_params)
        held = dict(cursor.fetchall())
    grouped: dict[str, str] = {}
    ctes: list[str] = []
    params: list[Any] = []
    for bank_id, (where, range_params) in ranges.items():
        if held[bank_id] >= SETWISE_ROWS_PER_SCOPE * scopes_of[bank_id]:
            continue
        grouped[bank_id] = name = f"g{len(ctes)}"
        ctes.append(f"{name} AS MATERIALIZED (SELECT m.tags, m.fact_type, "
                    f"max(m.updated_at) AS updated_at FROM banks_memoryunit m WHERE {where} "
                    f"GROUP BY m.tags, m.fact_type)")
        params += range_params
    return grouped, ctes, params


def any_newer_batch(
    items: Sequence[tuple[K, str, TagScope, datetime | None]],
    *,
    cutoff: datetime | None = None,
    using: str = "default",
) -> set[K]:
    """Keys whose scope holds a memory with ``updated_at`` later than their watermark, or held
    one a curation change (``banks_memorychange``) edited or removed after it.

    ``items`` are ``(key, bank_id, scope, watermark)``; a null watermark is earlier than
    everything. Uses the staleness variant of the scope. ``cutoff`` (optional) ignores memories
    stamped after it. One SQL statement for the whole batch, one probe per distinct
    (bank, staleness scope) — not per watermark, and not per way of writing the same scope
    (``_staleness_form``): a page of models sharing a scope asks once. Each probe reads the
    newest memory in scope stamped after the group's earliest watermark; a key is stale when
    that memory is newer than its own watermark.

    Every probe orders by ``updated_at DESC``, also where any match would do (its keys share
    one watermark): the order leaves the planner a backward scan of the ``(bank_id,
    updated_at)`` index stopped at the first match, or the tags' GIN index for a rare scope —
    both bounded by the bank's rows. Without it, ``LIMIT 1`` made a sequential scan of the
    whole table look cheapest (it assumes the matches spread evenly over the table, and the
    rows of one bank are not): in bench/bench_knowledge.py (one scope per page), ~60 such
    probes took ~0.9 s of a 1,000-page tree's request.

    A bank asked for many distinct scopes (a tree whose pages each have their own) is read once
    instead, when the range its probes read holds few enough memories (``_grouped_banks``):
    then the probes run over its (tags, fact type) groups, one more statement first counting
    the range.
    """
    groups: dict[tuple[str, TagScope], int] = {}
    # Per item, its group; per group, the earliest watermark (None: some key has none, so every
    # memory counts).
    item_groups: list[int] = []
    bounds: list[datetime | None] = []
    forms: dict[TagScope, TagScope] = {}
    for _, bank_id, scope, watermark in items:
        form = forms.get(scope)
        if form is None:
            form = forms[scope] = _staleness_form(scope)
        index = groups.setdefault((bank_id, form), len(groups))
        item_groups.append(index)
        if index == len(bounds):
            bounds.append(watermark)
        elif (bound := bounds[index]) is not None:
            bounds[index] = None if watermark is None else min(bound, watermark)
    if not groups:
        return set()
    grouped, ctes, params = _grouped_banks(groups, bounds, cutoff, using)
    changes = _grouped_changes(groups, bounds, cutoff, ctes, params)
    branches: list[str] = []
    for (bank_id, scope), index in groups.items():
        where, where_params = scope_sql(scope, alias="m", staleness=True)
        table = grouped.get(bank_id)
        conditions = [] if table else ["m.bank_id = %s"]
        branch_params: list[Any] = [] if table else [bank_id]
        if bounds[index] is not None:
            conditions.append("m.updated_at > %s")
            branch_params.append(bounds[index])
        if cutoff is not None and not table:
            conditions.append("m.updated_at <= %s")
            branch_params.append(cutoff)
        conditions.append(where)
        branch_params.extend(where_params)
        probe = (f"SELECT max(m.updated_at) FROM {table} m WHERE {' AND '.join(conditions)}"
                 if table else
                 f"SELECT m.updated_at FROM banks_memoryunit m WHERE "
                 f"{' AND '.join(conditions)} ORDER BY m.updated_at DESC LIMIT 1")
        branch = f"SELECT {int(index)} AS i, ({probe}) AS found"
        bound = bounds[index]
        if bound is not None:
            changed, changed_params = _changed_probe(changes[bank_id], scope, bound)
            branch = f"SELECT {int(index)} AS i, GREATEST(({probe}), ({changed})) AS found"
            branch_params.extend(changed_params)
        branches.append(branch)
        params.extend(branch_params)
    statement = " UNION ALL ".join(branches)
    if ctes:
        statement = f"WITH {', '.join(ctes)} {statement}"
    with connections[using].cursor() as cursor:
        cursor.execute(statement, params)
        found_at: dict[int, datetime | None] = dict(cursor.fetchall())
    out: set[K] = set()
    for (key, _, _, watermark), index in zip(items, item_groups, strict=True):
        found = found_at[index]
        if found is not None and (watermark is None or found > watermark):
            out.add(key)
    return out


def _grouped_changes(groups: Mapping[tuple[str, TagScope], int],
                     bounds: Sequence[datetime | None], cutoff: datetime | None,
                     ctes: list[str], params: list[Any]) -> dict[str, str]:
    """Per bank of ``groups``, a CTE (appended to ``ctes``, its parameters to ``params``) of
    the bank's curation changes (``banks_memorychange``: an edit, invalidation, restore or
    deletion, with the memory's tags and fact type before it) in the range its probes read,
    grouped by (tags, fact type), the newest stamp of each: a removal leaves no memory to be
    newer (docs/behaviour.md#staleness), and every scope probe of the bank reads these few
    groups instead of the changes. Only keys with a watermark read them (a model that never
    read anything has nothing a change could take back: its scope's memories decide), so the
    range starts at the bank's earliest watermark. ``{bank: CTE name}``."""
    lows: dict[str, datetime] = {}
    for (bank_id, _), index in groups.items():
        bound = bounds[index]
        if bound is not None:
            lows[bank_id] = min(lows.get(bank_id, bound), bound)
    names: dict[str, str] = {}
    for bank_id, low in lows.items():
        conditions = ["c.bank_id = %s", "c.changed_at > %s"]
        params += [bank_id, low]
        if cutoff is not None:
            conditions.append("c.changed_at <= %s")
            params.append(cutoff)
        names[bank_id] = name = f"h{len(names)}"
        ctes.append(f"{name} AS MATERIALIZED (SELECT c.tags, c.fact_type, "
                    f"max(c.changed_at) AS changed_at FROM banks_memorychange c "
                    f"WHERE {' AND '.join(conditions)} GROUP BY c.tags, c.fact_type)")
    return names


def _changed_probe(table: str, scope: TagScope, after: datetime) -> tuple[str, list[Any]]:
    """The newest change in ``table`` (``_grouped_changes``) of a memory that was in
    ``scope``, stamped after ``after``."""
    where, params = scope_sql(scope, alias="c", staleness=True)
    return (f"SELECT max(c.changed_at) FROM {table} c WHERE c.changed_at > %s AND {where}",
            [after, *params])


def _staleness_form(scope: TagScope) -> TagScope:
    """A flat scope written one way per set of memories its staleness variant selects, so that
    ``any_newer_batch`` probes each such set once (a page's models name the same scope in many
    ways). Tags are a set (sorted); on the tagged memories, the only ones the variant counts
    under ``any``/``all``, those are ``any_strict``/``all_strict``, and with one tag either is
    "carries it"; no tags is the whole bank but under ``exact``; fact types are a set. Scopes
    with ``tag_groups`` are kept as they are."""
    if scope.tag_groups is not None:
        return scope
    tags = tuple(sorted(set(scope.tags)))
    match = _STRICT.get(scope.tags_match, scope.tags_match)
    if not tags and match != "exact":
        match = "any"
    elif len(tags) == 1 and match == "any_strict":
        match = "all_strict"
    fact_types = None if scope.fact_types is None else tuple(sorted(set(scope.fact_types)))
    return TagScope(tags=tags, tags_match=match, fact_types=fact_types)


def matches(scope: TagScope, tags: Iterable[str], fact_type: str, *, staleness: bool = False) -> bool:
    """Evaluate ``scope`` on one memory in Python (same rule as ``scope_sql``)."""
    tag_set = frozenset(tags)
    if scope.fact_types is not None and fact_type not in scope.fact_types:
        return False
    groups = _groups(scope)
    if not tag_set:
        return includes_untagged(scope, staleness=staleness)
    return all(_eval_tagged(g, tag_set) for g in groups)


def _eval_tagged(group: Group, tags: frozenset[str]) -> bool:
    if isinstance(group, Leaf):
        if not group.tags:
            return group.match != "exact"
        wanted = frozenset(group.tags)
        if group.match in ("any", "any_strict"):
            return bool(tags & wanted)
        if group.match in ("all", "all_strict"):
            return wanted <= tags
        return tags == wanted
    if isinstance(group, Not):
        return not _eval_tagged(group.child, tags)
    if isinstance(group, And):
        return all(_eval_tagged(c, tags) for c in group.children)
    return any(_eval_tagged(c, tags) for c in group.children)
