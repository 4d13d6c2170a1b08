"""The one shape of a change to a page (docs/behaviour.md#the-change-shape): what a history entry,
the dry run, a proposal awaiting review and the ``mental_model.refreshed`` event all carry.

``page_diff(before, after)`` compares two versions of a page, each given as its markdown and its
stored structured document (either may be absent: the document is then the markdown split
afresh, so every page has sections and blocks). It returns plain JSON::

    {
      "changed": true,
      "sections": [                      # only the sections that changed, in the new order,
        {                                # removed ones after them in their old order
          "id": "pricing", "title": "Pricing", "change": "changed",  # added | removed | changed
          "heading": {"before": "## Prices", "after": "## Pricing"} | null,
          "blocks": [
            {"id": "b-1a2b", "change": "changed", "before": "old text", "after": "new text"},
            {"id": "b-9f8e", "change": "added", "before": null, "after": "text"},
            {"id": "b-77aa", "change": "removed", "before": "text", "after": null}
          ]
        }
      ],
      "counts": {"sections_added": 0, "sections_removed": 0, "sections_changed": 1,
                 "blocks_added": 1, "blocks_removed": 1, "blocks_changed": 1,
                 "lines_added": 3, "lines_removed": 2},
      "unified": "--- before\\n+++ after\\n@@ …"   # the line diff of the markdown
    }

Sections are matched by id (the slug of the title, stable across edits that keep the section);
blocks by id within the whole page (a block that moved between sections is removed from one and
added to the other). A block whose id stayed and whose text changed is ``changed``; a section
is ``changed`` when its heading line or any of its blocks changed, or its blocks moved. With no
change at all, ``changed`` is false, ``sections`` empty and ``unified`` "".
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import Any

from mentalmodels.document.structure import Document, Section, document_for

ADDED, REMOVED, CHANGED = "added", "removed", "changed"
COUNT_KEYS = (
    "sections_added", "sections_removed", "sections_changed",
    "blocks_added", "blocks_removed", "blocks_changed",
    "lines_added", "lines_removed",
)


@dataclass(frozen=True)
class PageVersion:
    """One side of a comparison: the page's markdown and its stored document (or None)."""

    content: str
    document: Any = None

    def as_document(self) -> Document:
        return document_for(self.content or "", self.document)


def _block(block_id: str, change: str, before: str | None, after: str | None) -> dict[str, Any]:
    return {"id": block_id, "change": change, "before": before, "after": after}


def _section_entry(section: Section, change: str, heading: dict[str, Any] | None,
                   blocks: list[dict[str, Any]]) -> dict[str, Any]:
    return {"id": section.id, "title": section.title, "change": change, "heading": heading,
            "blocks": blocks}


def _unified(before: str, after: str) -> tuple[str, int, int]:
    lines = list(difflib.unified_diff(
        before.splitlines(keepends=True), after.splitlines(keepends=True),
        fromfile="before", tofile="after",
    ))
    added = sum(1 for line in lines if line.startswith("+") and not line.startswith("+++"))
    removed = sum(1 for line in lines if line.startswith("-") and not line.startswith("---"))
    text = "".join(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n"
                   for line in lines)
    return text, added, removed


def page_diff(before: PageVersion, after: PageVersion) -> dict[str, Any]:
    """How ``after`` differs from ``before``, in the one change shape (module docstring)."""
    old, new = before.as_document(), after.as_document()
    old_blocks = {b.id: b.text for s in old.sections for b in s.blocks}
    old_owner = {b.id: s.id for s in old.sections for b in s.blocks}
    new_owner = {b.id: s.id for s in new.sections for b in s.blocks}
    old_sections = {s.id: s for s in old.sections}
    new_ids = {s.id for s in new.sections}
    counts = dict.fromkeys(COUNT_KEYS, 0)
    sections: list[dict[str, Any]] = []

    for section in new.sections:
        previous = old_sections.get(section.id)
        blocks: list[dict[str, Any]] = []
        for block in section.blocks:
            if old_owner.get(block.id) != section.id:
                blocks.append(_block(block.id, ADDED, None, block.text))
            elif old_blocks[block.id] != block.text:
                blocks.append(_block(block.id, CHANGED, old_blocks[block.id], block.text))
        if previous is None:
            counts["sections_added"] += 1
            sections.append(_section_entry(section, ADDED, None, blocks))
        else:
            blocks += [_block(b.id, REMOVED, b.text, None) for b in previous.blocks
                       if new_owner.get(b.id) != section.id]
            heading = (None if previous.heading == section.heading
                       else {"before": previous.heading, "after": section.heading})
            moved = ([b.id for b in previous.blocks if new_owner.get(b.id) == section.id]
                     != [b.id for b in section.blocks if old_owner.get(b.id) == section.id])
            if blocks or heading or moved:
                counts["sections_changed"] += 1
                sections.append(_section_entry(section, CHANGED, heading, blocks))
        for entry in blocks:
            counts[f"blocks_{entry['change']}"] += 1
    for section in old.sections:
        if section.id not in new_ids:
            counts["sections_removed"] += 1
            blocks = [_block(b.id, REMOVED, b.text, None) for b in section.blocks]
            counts["blocks_removed"] += len(blocks)
            sections.append(_section_entry(section, REMOVED, None, blocks))

    unified, counts["lines_added"], counts["lines_removed"] = _unified(
        before.content or "", after.content or "")
    changed = bool(sections) or bool(unified)
    return {"changed": changed, "sections": sections, "counts": counts, "unified": unified}
