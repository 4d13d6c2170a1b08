"""Delta operations (docs/behaviour.md#edits-by-id): id-addressed edits of a ``Document``, each with
a JSON Schema.

``apply_operations(doc, ops)`` applies a list of operations in order **on a copy** and returns the
new document with what was applied and what was dropped (with the reason). An operation is dropped —
never guessed at — when it does not match its schema, names a section or block the document does not
have, names a block of another section, anchors on a block that is not there, or would break the
document (a heading inside a block, an unclosed fence, a duplicate of a block already in the
section), or would make the markdown read differently from the structure. Each operation applies to
its own copy, so a dropped one leaves nothing half-done. Everything no applied operation touched is
the same ``Block`` value, so it renders byte for byte as before (docs/behaviour.md#edits-by-id).

The operations (``section_id`` / ``block_id`` are ids from ``Document.outline``):

- ``add_section {heading, level?, after_section_id?, blocks?}`` — after ``after_section_id``
  (absent or null: at the end);
- ``remove_section {section_id}``, ``rename_section {section_id, heading}`` (keeps its id);
- ``replace_section_blocks {section_id, blocks}``;
- ``append_block {section_id, markdown}``, ``insert_block {section_id, after_block_id, markdown}``
  (``after_block_id`` null: first in the section);
- ``replace_block {section_id, block_id, markdown}`` (keeps the id), ``remove_block {section_id,
  block_id}``.
"""

from __future__ import annotations

import copy
from collections.abc import Set
from dataclasses import dataclass, field
from typing import Any

import jsonschema

from mentalmodels.document.structure import (
    PREAMBLE_ID,
    Block,
    Document,
    Section,
    block_hash,
    fragments,
    heading_of,
    render,
    same_structure,
    slug,
    split,
    unique_id,
)

_ID = {"type": "string", "minLength": 1, "maxLength": 200}
_MARKDOWN = {"type": "string", "minLength": 1, "maxLength": 20000}
_HEADING = {"type": "string", "minLength": 1, "maxLength": 300}


def _op(name: str, properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {"op": {"const": name}, **properties},
        "required": ["op", *required],
        "additionalProperties": False,
    }


OPERATION_SCHEMAS: dict[str, dict[str, Any]] = {
    "add_section": _op(
        "add_section",
        {
            "heading": _HEADING,
            "level": {"type": "integer", "minimum": 1, "maximum": 6},
            "after_section_id": {"anyOf": [_ID, {"type": "null"}]},
            "blocks": {"type": "array", "items": _MARKDOWN, "maxItems": 50},
        },
        ["heading"],
    ),
    "remove_section": _op("remove_section", {"section_id": _ID}, ["section_id"]),
    "rename_section": _op("rename_section", {"section_id": _ID, "heading": _HEADING},
                          ["section_id", "heading"]),
    "replace_section_blocks": _op(
        "replace_section_blocks",
        {"section_id": _ID, "blocks": {"type": "array", "items": _MARKDOWN, "maxItems": 50}},
        ["section_id", "blocks"],
    ),
    "append_block": _op("append_block", {"section_id": _ID, "markdown": _MARKDOWN},
                        ["section_id", "markdown"]),
    "insert_block": _op(
        "insert_block",
        {"section_id": _ID, "after_block_id": {"anyOf": [_ID, {"type": "null"}]},
         "markdown": _MARKDOWN},
        ["section_id", "after_block_id", "markdown"],
    ),
    "replace_block": _op("replace_block",
                         {"section_id": _ID, "block_id": _ID, "markdown": _MARKDOWN},
                         ["section_id", "block_id", "markdown"]),
    "remove_block": _op("remove_block", {"section_id": _ID, "block_id": _ID},
                        ["section_id", "block_id"]),
}
OPERATION_NAMES = tuple(OPERATION_SCHEMAS)
MAX_OPERATIONS = 100

# What the ops call must answer: a list of objects. Each is validated on its own (above), so
# one malformed operation is dropped with its reason instead of failing the whole answer.
ANSWER_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "operations": {"type": "array", "items": {"type": "object"}, "maxItems": MAX_OPERATIONS},
    },
    "required": ["operations"],
}

_VALIDATORS = {name: jsonschema.Draft202012Validator(s) for name, s in OPERATION_SCHEMAS.items()}


class Dropped(Exception):
    """An operation that cannot apply; the message is the reason recorded for it."""

    def __init__(self, reason: str, *, wrong_ids: tuple[str, ...] = ()):
        super().__init__(reason)
        self.reason = reason
        self.wrong_ids = wrong_ids


@dataclass
class DeltaResult:
    document: Document
    applied: list[dict[str, Any]] = field(default_factory=list)
    skipped: list[dict[str, Any]] = field(default_factory=list)
    wrong_ids: list[str] = field(default_factory=list)

    @property
    def all_dropped(self) -> bool:
        return bool(self.skipped) and not self.applied


def validate_operation(op: Any) -> str | None:
    """The reason ``op`` does not match its schema, or ``None``."""
    if not isinstance(op, dict):
        return f"an operation must be an object, got {type(op).__name__}"
    name = op.get("op")
    if name not in _VALIDATORS:
        return f"op must be one of {', '.join(OPERATION_NAMES)}; got {name!r}"
    error = jsonschema.exceptions.best_match(_VALIDATORS[name].iter_errors(op))
    if error is None:
        return None
    where = ".".join(str(p) for p in error.absolute_path) or "operation"
    return f"{name}: {where}: {error.message}"


def apply_operations(doc: Document, ops: list[Any]) -> DeltaResult:
    """Apply ``ops`` in order to a copy of ``doc`` (the input is never modified)."""
    result = DeltaResult(document=copy.deepcopy(doc))
    for index, op in enumerate(ops):
        reason = validate_operation(op)
        working = copy.deepcopy(result.document)
        try:
            if reason is not None:
                raise Dropped(reason)
            _APPLY[op["op"]](working, op)
            if not same_structure(split(render(working)), working):
                # E.g. a block that opens a fence it never closes swallows what follows it: the
                # stored structure would no longer be what the markdown reads as
                # (docs/behaviour.md#the-document).
                raise Dropped("the edit would change how the rest of the document reads "
                              "(a block before it leaves a code fence open)")
        except Dropped as dropped:
            result.skipped.append({"index": index, "operation": op, "reason": dropped.reason})
            result.wrong_ids.extend(i for i in dropped.wrong_ids if i not in result.wrong_ids)
            continue
        result.document = working
        result.applied.append({"index": index, "operation": op})
    return result


# ---------------------------------------------------------------------------------------------
# the operations


def _section(doc: Document, section_id: str, *, key: str = "section_id") -> Section:
    section = doc.section(section_id)
    if section is not None:
        return section
    owner = doc.block_owner(section_id)
    if owner is not None:
        raise Dropped(
            f"{key} {section_id!r} is a block id (a block of section {owner.id!r}), not a "
            f"section id", wrong_ids=(section_id,),
        )
    raise Dropped(f"{key} {section_id!r}: no such section in the document",
                  wrong_ids=(section_id,))


def _block_index(doc: Document, section: Section, block_id: str, *, key: str = "block_id") -> int:
    for index, block in enumerate(section.blocks):
        if block.id == block_id:
            return index
    owner = doc.block_owner(block_id)
    if owner is not None:
        raise Dropped(f"{key} {block_id!r} belongs to section {owner.id!r}, not to "
                      f"{section.id!r}", wrong_ids=(block_id,))
    if doc.section(block_id) is not None:
        raise Dropped(f"{key} {block_id!r} is a section id, not a block id",
                      wrong_ids=(block_id,))
    raise Dropped(f"{key} {block_id!r}: no such block in the document", wrong_ids=(block_id,))


def _new_blocks(
    doc: Document, section: Section | None, markdowns: list[str], *, replacing: Set[str] = frozenset()
) -> list[Block]:
    """Blocks for the fragments an operation brings, refused whole if any is unfit."""
    existing = {b.text for b in section.blocks if b.id not in replacing} if section else set()
    texts: list[str] = []
    for markdown in markdowns:
        parts, problems = fragments(markdown)
        if problems:
            raise Dropped("; ".join(problems))
        texts.extend(parts)
    taken = doc.ids()
    blocks = []
    for text in texts:
        if text in existing:
            # An LLM re-emitting text the section already has is how paragraphs multiplied.
            raise Dropped("markdown duplicates a block the section already has")
        existing.add(text)
        block = Block(id=unique_id(block_hash(text), taken), text=text)
        taken.add(block.id)
        blocks.append(block)
    return blocks


def _heading_text(raw: str) -> str:
    line = raw.strip()
    if "\n" in line:
        raise Dropped("heading must be one line")
    parsed = heading_of(line)
    title = parsed[1] if parsed else line
    if not title:
        raise Dropped("heading is empty")
    return title


def _add_section(doc: Document, op: dict[str, Any]) -> None:
    title = _heading_text(op["heading"])
    if any(s.title.casefold() == title.casefold() for s in doc.sections if s.heading):
        existing = next(s.id for s in doc.sections if s.title.casefold() == title.casefold())
        raise Dropped(f"a section titled {title!r} already exists ({existing!r}); add blocks "
                      "to it instead")
    after = op.get("after_section_id")
    position = len(doc.sections)
    if after is not None:
        position = doc.sections.index(_section(doc, after, key="after_section_id")) + 1
    level = int(op.get("level") or 2)
    section = Section(id="", heading=f"{'#' * level} {title}", level=level, title=title)
    section.blocks = _new_blocks(doc, section, list(op.get("blocks") or []))
    section.id = unique_id(slug(title), doc.ids() | {b.id for b in section.blocks})
    doc.sections.insert(position, section)


def _remove_section(doc: Document, op: dict[str, Any]) -> None:
    section = _section(doc, op["section_id"])
    if section.id == PREAMBLE_ID:
        raise Dropped("the preamble cannot be removed; remove its blocks instead")
    doc.sections.remove(section)


def _rename_section(doc: Document, op: dict[str, Any]) -> None:
    section = _section(doc, op["section_id"])
    if section.id == PREAMBLE_ID:
        raise Dropped("the preamble has no heading to rename; use add_section")
    title = _heading_text(op["heading"])
    section.title = title
    section.heading = f"{'#' * section.level} {title}"


def _replace_section_blocks(doc: Document, op: dict[str, Any]) -> None:
    section = _section(doc, op["section_id"])
    section.blocks = _new_blocks(doc, section, list(op["blocks"]),
                                 replacing={b.id for b in section.blocks})


def _append_block(doc: Document, op: dict[str, Any]) -> None:
    section = _section(doc, op["section_id"])
    section.blocks.extend(_new_blocks(doc, section, [op["markdown"]]))


def _insert_block(doc: Document, op: dict[str, Any]) -> None:
    section = _section(doc, op["section_id"])
    after = op.get("after_block_id")
    position = 0 if after is None else _block_index(doc, section, after, key="after_block_id") + 1
    section.blocks[position:position] = _new_blocks(doc, section, [op["markdown"]])


def _replace_block(doc: Document, op: dict[str, Any]) -> None:
    section = _section(doc, op["section_id"])
    index = _block_index(doc, section, op["block_id"])
    old = section.blocks[index]
    new = _new_blocks(doc, section, [op["markdown"]], replacing={old.id})
    # The block keeps its id (it is the same block, edited); extra fragments follow it.
    first = Block(id=old.id, text=new[0].text, gap=old.gap)
    section.blocks[index:index + 1] = [first, *new[1:]]


def _remove_block(doc: Document, op: dict[str, Any]) -> None:
    section = _section(doc, op["section_id"])
    del section.blocks[_block_index(doc, section, op["block_id"])]


_APPLY = {
    "add_section": _add_section,
    "remove_section": _remove_section,
    "rename_section": _rename_section,
    "replace_section_blocks": _replace_section_blocks,
    "append_block": _append_block,
    "insert_block": _insert_block,
    "replace_block": _replace_block,
    "remove_block": _remove_block,
}
