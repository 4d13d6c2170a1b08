"""The one change shape (docs/behaviour.md#the-change-shape): sections and blocks by id, counts,
and the line diff."""

from __future__ import annotations

from mentalmodels.document.diff import COUNT_KEYS, PageVersion, page_diff
from mentalmodels.document.edits import apply_operations
from mentalmodels.document.structure import render, split

BEFORE = "# Team\n\nAlice leads.\n\n## Pricing\n\nTen dollars.\n\nBilled monthly.\n\n## Old\n\nGone soon.\n"


def test_no_change_is_empty() -> None:
    diff = page_diff(PageVersion(BEFORE), PageVersion(BEFORE))
    assert diff == {"changed": False, "sections": [], "counts": dict.fromkeys(COUNT_KEYS, 0),
                    "unified": ""}


def test_sections_and_blocks_added_changed_removed() -> None:
    after = "# Team\n\nAlice leads.\n\n## Pricing\n\nTwelve dollars.\n\nBilled monthly.\n\n## New\n\nFresh.\n"
    diff = page_diff(PageVersion(BEFORE), PageVersion(after))
    assert diff["changed"] is True
    by_id = {s["id"]: s for s in diff["sections"]}
    assert set(by_id) == {"pricing", "new", "old"}
    assert by_id["new"]["change"] == "added"
    assert by_id["new"]["blocks"] == [{"id": by_id["new"]["blocks"][0]["id"], "change": "added",
                                       "before": None, "after": "Fresh."}]
    assert by_id["old"]["change"] == "removed"
    assert [b["before"] for b in by_id["old"]["blocks"]] == ["Gone soon."]
    pricing = by_id["pricing"]
    assert pricing["change"] == "changed" and pricing["heading"] is None
    # Block ids are content hashes: a rewritten paragraph split afresh is a new block.
    assert sorted((b["change"], b["before"], b["after"]) for b in pricing["blocks"]) == [
        ("added", None, "Twelve dollars."), ("removed", "Ten dollars.", None)]
    assert diff["counts"] == {"sections_added": 1, "sections_removed": 1, "sections_changed": 1,
                              "blocks_added": 2, "blocks_removed": 2, "blocks_changed": 0,
                              "lines_added": 3, "lines_removed": 3}
    assert "-Ten dollars.\n" in diff["unified"] and "+Twelve dollars.\n" in diff["unified"]
    assert diff["unified"].startswith("--- before\n+++ after\n")


def test_a_block_replaced_by_id_is_changed_and_a_renamed_heading_shows() -> None:
    doc = split(BEFORE)
    pricing = doc.section("pricing")
    assert pricing is not None
    block_id = pricing.blocks[0].id
    edited = apply_operations(doc, [
        {"op": "replace_block", "section_id": "pricing", "block_id": block_id,
         "markdown": "Twelve dollars."},
    ]).document
    after = PageVersion(render(edited), edited.as_json())
    diff = page_diff(PageVersion(BEFORE, doc.as_json()), after)
    [section] = diff["sections"]
    assert section["id"] == "pricing"
    assert section["blocks"] == [{"id": block_id, "change": "changed", "before": "Ten dollars.",
                                  "after": "Twelve dollars."}]
    assert diff["counts"]["blocks_changed"] == 1

    renamed = "# Team\n\nAlice leads.\n\n## Pricing!\n\nTen dollars.\n\nBilled monthly.\n\n## Old\n\nGone soon.\n"
    diff = page_diff(PageVersion(BEFORE), PageVersion(renamed))
    [section] = diff["sections"]
    assert section["heading"] == {"before": "## Pricing", "after": "## Pricing!"}
    assert section["blocks"] == []


def test_reordered_blocks_change_their_section_and_an_empty_page_diffs() -> None:
    swapped = "# Team\n\nAlice leads.\n\n## Pricing\n\nBilled monthly.\n\nTen dollars.\n\n## Old\n\nGone soon.\n"
    diff = page_diff(PageVersion(BEFORE), PageVersion(swapped))
    assert [(s["id"], s["change"], s["blocks"]) for s in diff["sections"]] == [
        ("pricing", "changed", [])]
    first = page_diff(PageVersion(""), PageVersion(BEFORE))
    assert first["counts"]["sections_added"] == 3  # team, pricing, old; the preamble always exists
    assert first["counts"]["lines_removed"] == 0
