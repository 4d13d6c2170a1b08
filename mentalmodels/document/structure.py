"""The structured document of a mental model (docs/behaviour.md#the-document): sections of verbatim
markdown blocks.

A document is an ordered list of sections (``id``, ``heading`` line, ``level``, ``title``),
each holding an ordered list of blocks (``id`` and ``text``: one markdown fragment — a
paragraph, a list, a table, a code fence — exactly as written). The first section is always
the preamble (id ``preamble``, no heading): whatever comes before the first heading.

``split`` is the one parser and ``render`` the one renderer. Splitting is lossless: every
element also keeps the whitespace that followed it (``gap``), so ``render(split(x)) == x``
byte for byte, and ``split(render(d))`` gives back ``d``'s sections and blocks. The rules:

- an ATX heading (``#``..``######`` after at most three spaces) outside a fence starts a section;
- a blank line outside a fence ends a block; inside a ````` or ``~~~`` fence nothing does (an
  unclosed fence runs to the end of the document, as CommonMark reads it);
- text before the first heading is the preamble's.

Ids are stable: a section id is the slug of its title, a block id ``b-`` and a content hash,
each made unique within the document (one namespace for both, so an id names one thing).
An edit that keeps an element (``replace_block``, ``rename_section``) keeps its id; the
renderer only touches the gaps an edit made wrong (an element that used to end the document
and is now followed by another gets a blank line after it).

The stored shape (``MentalModel.document``) is ``{"version": 1, "lead": str, "sections": [...]}``
with plain JSON values, so the database column holds exactly what ``as_json`` returns.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

PREAMBLE_ID = "preamble"
FORMAT_VERSION = 1
BLOCK_GAP = "\n\n"
_HEADING = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$")
_FENCE_OPEN = re.compile(r"^ {0,3}(`{3,}|~{3,})(.*)$")
_SLUG_DROP = re.compile(r"[^a-z0-9]+")
SLUG_MAX = 48


class DocumentError(ValueError):
    """A stored document that does not have the document's shape."""


@dataclass
class Block:
    id: str
    text: str
    # What followed it when split; "" for an element an edit made (the renderer separates).
    gap: str = ""


@dataclass
class Section:
    id: str
    heading: str | None  # the heading line as written; None for the preamble
    level: int  # 0 for the preamble
    title: str
    gap: str = ""  # after the heading line
    blocks: list[Block] = field(default_factory=list)


@dataclass
class Document:
    sections: list[Section]
    lead: str = ""  # blank lines before the first element

    # --- lookups --------------------------------------------------------------------------

    def section(self, section_id: str) -> Section | None:
        return next((s for s in self.sections if s.id == section_id), None)

    def block_owner(self, block_id: str) -> Section | None:
        """The section holding block ``block_id``, if any."""
        return next((s for s in self.sections if any(b.id == block_id for b in s.blocks)), None)

    def ids(self) -> set[str]:
        out = {s.id for s in self.sections}
        out.update(b.id for s in self.sections for b in s.blocks)
        return out

    def blocks(self) -> Iterator[tuple[Section, Block]]:
        for section in self.sections:
            for block in section.blocks:
                yield section, block

    # --- ids ------------------------------------------------------------------------------

    def new_section_id(self, title: str) -> str:
        return unique_id(slug(title), self.ids())

    def new_block_id(self, text: str) -> str:
        return unique_id(block_hash(text), self.ids())

    # --- serialisation --------------------------------------------------------------------

    def as_json(self) -> dict[str, Any]:
        return {
            "version": FORMAT_VERSION,
            "lead": self.lead,
            "sections": [
                {
                    "id": s.id, "heading": s.heading, "level": s.level, "title": s.title,
                    "gap": s.gap,
                    "blocks": [{"id": b.id, "text": b.text, "gap": b.gap} for b in s.blocks],
                }
                for s in self.sections
            ],
        }

    @classmethod
    def from_json(cls, data: Any) -> Document:
        try:
            if data.get("version") != FORMAT_VERSION:
                raise DocumentError(f"unknown document version {data.get('version')!r}")
            sections = [
                Section(
                    id=str(s["id"]), heading=s["heading"], level=int(s["level"]),
                    title=str(s["title"]), gap=str(s["gap"]),
                    blocks=[Block(id=str(b["id"]), text=str(b["text"]), gap=str(b["gap"]))
                            for b in s["blocks"]],
                )
                for s in data["sections"]
            ]
        except (AttributeError, KeyError, TypeError, ValueError) as exc:
            if isinstance(exc, DocumentError):
                raise
            raise DocumentError(f"stored document is malformed: {type(exc).__name__}: {exc}") from exc
        if not sections or sections[0].id != PREAMBLE_ID:
            raise DocumentError("stored document has no preamble section")
        return cls(sections=sections, lead=str(data.get("lead") or ""))

    def outline(self) -> list[dict[str, Any]]:
        """The document as the delta prompt shows it: every section and block with its id."""
        return [
            {
                "section_id": s.id,
                "heading": s.heading,
                "blocks": [{"block_id": b.id, "markdown": b.text} for b in s.blocks],
            }
            for s in self.sections
        ]


# ---------------------------------------------------------------------------------------------
# ids


def slug(title: str) -> str:
    value = _SLUG_DROP.sub("-", title.lower()).strip("-")[:SLUG_MAX].strip("-")
    return value or "section"


def block_hash(text: str) -> str:
    return "b-" + hashlib.sha256(text.encode("utf-8")).hexdigest()[:8]


def unique_id(base: str, taken: set[str]) -> str:
    if base not in taken and base != PREAMBLE_ID:
        return base
    n = 2
    while f"{base}-{n}" in taken:
        n += 1
    return f"{base}-{n}"


# ---------------------------------------------------------------------------------------------
# split


def heading_of(line: str) -> tuple[int, str] | None:
    """``(level, title)`` when ``line`` (without its newline) is an ATX heading."""
    match = _HEADING.match(line)
    if match is None:
        return None
    return len(match.group(1)), (match.group(2) or "").strip()


def _lines(text: str) -> list[str]:
    """Lines with their ``\n`` (only ``\n`` ends a line: the split must be lossless)."""
    parts = text.split("\n")
    out = [p + "\n" for p in parts[:-1]]
    if parts[-1]:
        out.append(parts[-1])
    return out


def _is_blank(line: str) -> bool:
    return line.strip(" \t\r\n") == ""


def _fence_closes(line: str, marker: str) -> bool:
    stripped = line.rstrip("\r\n")
    body = stripped.lstrip(" ")
    if len(stripped) - len(body) > 3:
        return False
    run = len(body) - len(body.lstrip(marker[0]))
    return run >= len(marker) and body[run:].strip() == ""


def _tokens(text: str) -> Iterator[tuple[str, str, str]]:
    """``(kind, text, gap)`` in order: kind ``heading`` or ``block``; ``text`` without its last
    newline; ``gap`` the line ending and blank lines that follow. The first token may be
    ``lead`` (blank lines at the very start)."""
    lines = _lines(text)
    i, n = 0, len(lines)
    lead = []
    while i < n and _is_blank(lines[i]):
        lead.append(lines[i])
        i += 1
    if lead:
        yield "lead", "", "".join(lead)
    while i < n:
        line = lines[i]
        bare = line.rstrip("\n")
        if heading_of(bare.rstrip("\r")) is not None:
            kind, body = "heading", [line]
            i += 1
        else:
            kind, body, fence = "block", [], None
            while i < n:
                line = lines[i]
                bare = line.rstrip("\n")
                if fence is None:
                    if body and (_is_blank(line) or heading_of(bare.rstrip("\r")) is not None):
                        break
                    opened = _FENCE_OPEN.match(bare.rstrip("\r"))
                    if opened and not (opened.group(1)[0] == "`" and "`" in opened.group(2)):
                        fence = opened.group(1)
                elif _fence_closes(line, fence):
                    fence = None
                body.append(line)
                i += 1
        gap = []
        last = body[-1]
        if last.endswith("\n"):
            body[-1] = last[:-1]
            gap.append("\n")
        while i < n and _is_blank(lines[i]):
            gap.append(lines[i])
            i += 1
        yield kind, "".join(body), "".join(gap)


def split(markdown: str) -> Document:
    """The document of ``markdown`` (lossless: ``render(split(x)) == x``)."""
    doc = Document(sections=[Section(id=PREAMBLE_ID, heading=None, level=0, title="", gap="")])
    for kind, text, gap in _tokens(markdown):
        if kind == "lead":
            doc.lead = gap
        elif kind == "heading":
            parsed = heading_of(text.rstrip("\r"))
            level, title = parsed if parsed else (1, text)
            doc.sections.append(
                Section(id=doc.new_section_id(title), heading=text, level=level, title=title,
                        gap=gap)
            )
        else:
            doc.sections[-1].blocks.append(Block(id=doc.new_block_id(text), text=text, gap=gap))
    return doc


def fragments(markdown: str) -> tuple[list[str], list[str]]:
    """A fragment an operation brings: ``(block texts, problems)``. Surrounding blank lines
    are dropped; a heading or an unclosed fence inside is a problem (it would change the
    document's structure beyond the block)."""
    problems: list[str] = []
    texts: list[str] = []
    stripped = markdown.strip("\n")
    if not stripped.strip():
        return [], ["markdown is empty"]
    for kind, text, _gap in _tokens(stripped):
        if kind == "heading":
            problems.append(f"markdown contains a heading ({text.strip()[:60]!r}); "
                            "use add_section for a new section")
        elif kind == "block":
            texts.append(text)
    if texts and _ends_inside_fence(stripped):
        problems.append("markdown opens a code fence it does not close")
    return texts, problems


def _ends_inside_fence(text: str) -> bool:
    fence = None
    for line in _lines(text):
        bare = line.rstrip("\r\n")
        if fence is None:
            opened = _FENCE_OPEN.match(bare)
            if opened and not (opened.group(1)[0] == "`" and "`" in opened.group(2)):
                fence = opened.group(1)
        elif _fence_closes(line, fence):
            fence = None
    return fence is not None


# ---------------------------------------------------------------------------------------------
# render


def _elements(doc: Document) -> list[tuple[str, str, str]]:
    out: list[tuple[str, str, str]] = []
    for section in doc.sections:
        if section.heading is not None:
            out.append(("heading", section.heading, section.gap))
        out.extend(("block", b.text, b.gap) for b in section.blocks)
    return out


def render(doc: Document | None) -> str:
    """The markdown of ``doc``: elements in order, each followed by its gap, where a gap that
    no longer separates (an edit put something after what used to be last) becomes a blank line."""
    if doc is None:
        return ""
    elements = _elements(doc)
    parts = [doc.lead]
    for index, (kind, text, gap) in enumerate(elements):
        parts.append(text)
        if index + 1 < len(elements):
            next_kind = elements[index + 1][0]
            # A heading line ends at its newline; two blocks need a blank line between them.
            needed = 1 if "heading" in (kind, next_kind) else 2
            if gap.count("\n") < needed or not gap.endswith("\n"):
                gap = BLOCK_GAP
        parts.append(gap)
    return "".join(parts)


def render_json(data: Any) -> str:
    return render(Document.from_json(data)) if data else ""


def same_structure(a: Document, b: Document) -> bool:
    """Whether two documents hold the same headings and block texts in the same order."""
    def shape(d: Document) -> list[tuple[str | None, list[str]]]:
        return [(s.heading, [blk.text for blk in s.blocks]) for s in d.sections]

    return shape(a) == shape(b)


def document_for(content: str, stored: Any) -> Document:
    """The document to edit: the stored one when it renders to ``content``
    (docs/behaviour.md#the-document holds), else
    ``content`` split afresh (a document written before this column was kept, or edited
    outside the pipeline), so an edit never lands on text the reader does not see."""
    if stored:
        try:
            doc = Document.from_json(stored)
        except DocumentError:
            doc = None
        if doc is not None and render(doc) == content:
            return doc
    return split(content)

