"""The structured document and its operations (docs/behaviour.md#delta-mode), property-based where it matters:
the split is lossless, every operation leaves every block it does not name byte-identical, ids
stay unique, and a long document splits, edits and renders."""

from __future__ import annotations

import random

import pytest
from hypothesis import HealthCheck, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from mentalmodels.document.edits import apply_operations, validate_operation
from mentalmodels.document.structure import (
    PREAMBLE_ID,
    Document,
    document_for,
    render,
    same_structure,
    split,
)

WORDS = st.sampled_from(["alpha", "beta", "deploy", "Friday", "#tag", "`x`", "a|b", "-", "1.",
                         "~~", "**bold**", "##", "café", "```", "~~~~"])
TEXT = st.lists(WORDS, min_size=1, max_size=6).map(" ".join)


@st.composite
def paragraph(draw):
    return "\n".join(draw(st.lists(TEXT, min_size=1, max_size=3)))


@st.composite
def nested_list(draw):
    lines = []
    for _ in range(draw(st.integers(1, 5))):
        depth = draw(st.integers(0, 2))
        marker = draw(st.sampled_from(["-", "*", "1."]))
        lines.append("  " * depth + f"{marker} {draw(TEXT)}")
    return "\n".join(lines)


@st.composite
def table(draw):
    cols = draw(st.integers(1, 3))
    rows = ["| " + " | ".join(f"h{i}" for i in range(cols)) + " |",
            "|" + "---|" * cols]
    for _ in range(draw(st.integers(0, 3))):
        rows.append("| " + " | ".join(draw(TEXT).replace("|", "/") for _ in range(cols)) + " |")
    return "\n".join(rows)


@st.composite
def fence(draw):
    marker = draw(st.sampled_from(["```", "~~~", "````"]))
    body = draw(st.lists(st.sampled_from(["# not a heading", "", "## nor this", "code()",
                                          "   ", "```" if marker != "```" else "~~~"]),
                         max_size=6))
    info = draw(st.sampled_from(["", "python", "md"]))
    return "\n".join([marker + info, *body, marker])


@st.composite
def heading(draw):
    level = draw(st.integers(1, 6))
    closing = draw(st.sampled_from(["", " #", " ###"]))
    return "#" * level + " " + draw(TEXT) + closing


BLOCK = st.one_of(paragraph(), nested_list(), table(), fence())
GAP = st.sampled_from(["\n\n", "\n\n\n", "\n  \n", "\n\t\n\n"])


@st.composite
def markdown(draw):
    parts = []
    if draw(st.booleans()):
        parts.append(draw(st.sampled_from(["", "\n", "\n\n"])))
    for _ in range(draw(st.integers(0, 12))):
        element = draw(st.one_of(BLOCK, heading()))
        parts.append(element)
        parts.append(draw(GAP) if element[0] != "#" else draw(st.sampled_from(["\n", "\n\n"])))
    text = "".join(parts)
    return text if draw(st.booleans()) else text.rstrip("\n")


PROPERTY = hsettings(max_examples=150, deadline=None,
                     suppress_health_check=[HealthCheck.too_slow])


@PROPERTY
@given(markdown())
def test_split_then_render_is_byte_identical(text):
    doc = split(text)
    assert render(doc) == text
    again = split(render(doc))
    assert same_structure(again, doc)
    assert Document.from_json(doc.as_json()) == doc


@PROPERTY
@given(markdown())
def test_ids_are_unique_and_stable(text):
    doc = split(text)
    ids = [s.id for s in doc.sections] + [b.id for _, b in doc.blocks()]
    assert len(ids) == len(set(ids))
    assert split(text).as_json() == doc.as_json()


def test_fence_holds_hash_lines_and_blank_lines_inside_one_block():
    text = "# Title\n\n```md\n# not a heading\n\n## still code\n```\n\nafter"
    doc = split(text)
    assert [s.title for s in doc.sections] == ["", "Title"]
    assert [b.text for b in doc.sections[1].blocks] == [
        "```md\n# not a heading\n\n## still code\n```", "after"]
    assert render(doc) == text


def test_text_before_the_first_heading_is_the_preamble():
    doc = split("intro line\n\n## A\n\nbody")
    assert doc.sections[0].id == PREAMBLE_ID
    assert [b.text for b in doc.sections[0].blocks] == ["intro line"]
    assert [s.id for s in doc.sections] == [PREAMBLE_ID, "a"]


def test_duplicate_headings_get_unique_slugs():
    doc = split("## Risks\n\na\n\n## Risks\n\nb\n\n## Preamble\n\nc")
    assert [s.id for s in doc.sections] == [PREAMBLE_ID, "risks", "risks-2", "preamble-2"]


def _all_ops(doc: Document, rnd: random.Random) -> list[dict]:
    """One random operation of every kind, against ids the document has."""
    sections = [s for s in doc.sections if s.id != PREAMBLE_ID] or doc.sections
    section = rnd.choice(sections)
    blocks = [b for _, b in doc.blocks()]
    own = section.blocks
    ops = [
        {"op": "add_section", "heading": f"New {rnd.randint(0, 10**6)}",
         "after_section_id": rnd.choice([None, section.id]), "blocks": ["fresh text"]},
        {"op": "append_block", "section_id": section.id, "markdown": f"note {rnd.random()}"},
        {"op": "insert_block", "section_id": section.id,
         "after_block_id": own[0].id if own else None, "markdown": f"ins {rnd.random()}"},
    ]
    if section.id != PREAMBLE_ID:
        ops += [{"op": "rename_section", "section_id": section.id, "heading": "Renamed"},
                {"op": "remove_section", "section_id": section.id},
                {"op": "replace_section_blocks", "section_id": section.id, "blocks": ["only"]}]
    if own:
        target = rnd.choice(own)
        ops += [{"op": "replace_block", "section_id": section.id, "block_id": target.id,
                 "markdown": f"replaced {rnd.random()}"},
                {"op": "remove_block", "section_id": section.id, "block_id": target.id}]
    assert blocks is not None
    return ops


def _named(op: dict, doc: Document) -> set[str]:
    """Block ids an operation may change: the ones it names, or all of the section it replaces
    or removes."""
    if op["op"] in ("replace_section_blocks", "remove_section"):
        section = doc.section(op["section_id"])
        return {b.id for b in section.blocks} if section else set()
    return {op.get("block_id")} - {None}


@PROPERTY
@given(markdown(), st.randoms(use_true_random=False))
def test_every_operation_leaves_every_untouched_block_byte_identical(text, rnd):
    doc = split(text)
    before = {b.id: b.text for _, b in doc.blocks()}
    for op in _all_ops(doc, rnd):
        assert validate_operation(op) is None, op
        result = apply_operations(doc, [op])
        assert render(doc) == text  # the input is never modified
        after = {b.id: b.text for _, b in result.document.blocks()}
        for block_id, original in before.items():
            if block_id not in _named(op, doc) and block_id in after:
                assert after[block_id] == original
        if op["op"] not in ("remove_block", "remove_section", "replace_section_blocks"):
            assert set(before) - _named(op, doc) <= set(after)
        ids = [s.id for s in result.document.sections] + [b.id for _, b in result.document.blocks()]
        assert len(ids) == len(set(ids))
        # docs/behaviour.md#the-document: what is stored renders to what is read, and splits back into the same thing.
        rendered = render(result.document)
        assert same_structure(split(rendered), result.document)
        # Every untouched block's text appears verbatim in the rendered markdown.
        for block_id, original in before.items():
            if block_id not in _named(op, doc) and block_id in after:
                assert original in rendered


@PROPERTY
@given(markdown(), st.randoms(use_true_random=False))
def test_a_sequence_of_operations_keeps_the_document_whole(text, rnd):
    doc = split(text)
    ops = _all_ops(doc, rnd)
    rnd.shuffle(ops)
    result = apply_operations(doc, ops)
    assert len(result.applied) + len(result.skipped) == len(ops)
    named = set().union(*(_named(op, doc) for op in ops))
    after = {b.id: b.text for _, b in result.document.blocks()}
    for section, block in doc.blocks():
        if block.id not in named and block.id in after:
            assert after[block.id] == block.text
    ids = [s.id for s in result.document.sections] + [b.id for _, b in result.document.blocks()]
    assert len(ids) == len(set(ids))
    assert same_structure(split(render(result.document)), result.document)


def test_replace_block_and_rename_section_keep_their_ids():
    doc = split("## Team\n\nAlice leads.\n\nBob helps.")
    alice = doc.sections[1].blocks[0].id
    result = apply_operations(doc, [
        {"op": "replace_block", "section_id": "team", "block_id": alice, "markdown": "Carol leads."},
        {"op": "rename_section", "section_id": "team", "heading": "## The team"},
    ])
    assert not result.skipped
    section = result.document.sections[1]
    assert (section.id, section.heading) == ("team", "## The team")
    assert (section.blocks[0].id, section.blocks[0].text) == (alice, "Carol leads.")
    assert render(result.document) == "## The team\n\nCarol leads.\n\nBob helps."


def test_missing_ids_and_foreign_blocks_are_dropped_with_reasons_while_the_rest_apply():
    doc = split("## A\n\none\n\n## B\n\ntwo")
    block_of_b = doc.sections[2].blocks[0].id
    result = apply_operations(doc, [
        {"op": "append_block", "section_id": "nope", "markdown": "x"},
        {"op": "remove_block", "section_id": "a", "block_id": block_of_b},
        {"op": "append_block", "section_id": block_of_b, "markdown": "y"},
        {"op": "insert_block", "section_id": "a", "after_block_id": "b-missing", "markdown": "z"},
        {"op": "append_block", "section_id": "a", "markdown": "three"},
        {"op": "frobnicate"},
        {"op": "append_block", "section_id": "a"},
    ])
    reasons = [s["reason"] for s in result.skipped]
    assert [s["index"] for s in result.skipped] == [0, 1, 2, 3, 5, 6]
    assert "'nope': no such section" in reasons[0]
    assert f"{block_of_b!r} belongs to section 'b', not to 'a'" in reasons[1]
    assert f"section_id {block_of_b!r} is a block id" in reasons[2]
    assert "after_block_id 'b-missing'" in reasons[3]
    assert "op must be one of" in reasons[4]
    assert "'markdown' is a required property" in reasons[5]
    assert [a["index"] for a in result.applied] == [4]
    assert set(result.wrong_ids) == {"nope", block_of_b, "b-missing"}
    assert render(result.document) == "## A\n\none\n\nthree\n\n## B\n\ntwo"


def test_fragments_that_would_break_the_structure_are_dropped():
    doc = split("## A\n\none")
    result = apply_operations(doc, [
        {"op": "append_block", "section_id": "a", "markdown": "## Sneaky\n\ntext"},
        {"op": "append_block", "section_id": "a", "markdown": "```\nopen fence"},
        {"op": "append_block", "section_id": "a", "markdown": "one"},
        {"op": "add_section", "heading": "A", "blocks": []},
    ])
    assert not result.applied
    reasons = " | ".join(s["reason"] for s in result.skipped)
    assert "heading" in reasons and "does not close" in reasons and "duplicates" in reasons
    assert "already exists" in reasons
    assert render(result.document) == "## A\n\none"


def test_a_long_document_with_forty_blocks_splits_edits_and_renders():
    sections = []
    for s in range(8):
        blocks = [f"Paragraph {s}.{b}: " + "steady words of the playbook " * 5 for b in range(4)]
        blocks.append("| k | v |\n|---|---|\n| a | b |")
        sections.append(f"## Part {s}\n\n" + "\n\n".join(blocks))
    text = "\n\n".join(sections)
    assert len(text) >= 5000
    doc = split(text)
    assert sum(1 for _ in doc.blocks()) == 40
    assert render(doc) == text
    target = doc.sections[4].blocks[2]
    result = apply_operations(doc, [
        {"op": "replace_block", "section_id": "part-3", "block_id": target.id, "markdown": "New."},
        {"op": "append_block", "section_id": "part-7", "markdown": "- one\n  - two"},
    ])
    assert len(result.applied) == 2
    out = render(result.document)
    assert out.count("Paragraph") == 31 and "New." in out and out.endswith("- one\n  - two")


def test_document_for_prefers_the_stored_document_only_when_it_renders_the_content():
    doc = split("## A\n\none")
    doc.sections[1].blocks[0].id = "b-custom"
    stored = doc.as_json()
    assert document_for("## A\n\none", stored).sections[1].blocks[0].id == "b-custom"
    assert document_for("## A\n\nedited", stored).sections[1].blocks[0].text == "edited"
    assert document_for("x", {"version": 99}).sections[0].blocks[0].text == "x"


@pytest.mark.parametrize("op", [
    {"op": "add_section", "heading": "x", "level": 9},
    {"op": "replace_block", "section_id": "a", "block_id": "b", "markdown": ""},
    {"op": "remove_block", "section_id": "a", "block_id": "b", "extra": 1},
    "not an object",
])
def test_operations_are_validated_by_their_schema(op):
    assert validate_operation(op) is not None
