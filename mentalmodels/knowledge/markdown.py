"""A page as a markdown document, and the export bundle's files (upstream's formats).

Pure functions of the values given: no database. A page document is a YAML frontmatter block
(``id``, ``type``, ``title``, ``description``, ``tags``, ``timestamp``; every scalar
double-quoted so a name such as ``true`` or ``2026-01-01`` stays a string; empty values left
out) and the stored body. A page's ``type`` is its first ``type:<x>`` tag (those tags are not
shown among its tags), else ``knowledge-page``. Read surfaces say "No content yet." for a page
without a body; the export keeps the bare document, so a bundle read back holds no placeholder.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, NamedTuple

DEFAULT_TYPE = "knowledge-page"
TYPE_PREFIX = "type:"
EMPTY_NOTICE = "No content yet."
INDEX_FILE = "index.md"


class PageType(NamedTuple):
    type: str
    display_tags: list[str]


def page_type(tags: Iterable[str] | None) -> PageType:
    kinds = [t[len(TYPE_PREFIX):].strip() for t in tags or () if t.startswith(TYPE_PREFIX)]
    shown = [t for t in tags or () if not t.startswith(TYPE_PREFIX)]
    return PageType(next((k for k in kinds if k), DEFAULT_TYPE), shown)


def _quoted(value: Any) -> str:
    text = str(value).replace("\\", "\\\\").replace('"', '\\"')
    return '"' + text.replace("\r", "").replace("\n", "\\n") + '"'


def frontmatter(fields: Mapping[str, Any]) -> str:
    lines = ["---"]
    for key, value in fields.items():
        if value is None or (isinstance(value, list) and not value):
            continue
        if isinstance(value, list):
            lines.append(f"{key}:")
            lines += [f"  - {_quoted(item)}" for item in value]
        else:
            lines.append(f"{key}: {_quoted(value)}")
    return "\n".join([*lines, "---"])


def page_document(*, page_id: str, name: str, source_query: str | None, tags: Sequence[str],
                  timestamp: str | None, body: str, notice_when_empty: bool) -> str:
    kind = page_type(tags)
    head = frontmatter({"id": page_id, "type": kind.type, "title": name,
                        "description": source_query, "tags": kind.display_tags,
                        "timestamp": timestamp})
    text = body.strip() or (EMPTY_NOTICE if notice_when_empty else "")
    return f"{head}\n\n{text}\n" if text else f"{head}\n"


def page_file(page_id: str) -> str:
    return f"{page_id}.md"


def log_file(page_id: str) -> str:
    return f"{page_id}.log.md"


class IndexEntry(NamedTuple):
    id: str
    parent_id: str | None
    kind: str
    name: str
    description: str | None


def index_document(entries: Sequence[IndexEntry]) -> str:
    """``index.md``: the tree as nested bullets, folders bold, pages linked to their files."""
    lines = [frontmatter({"type": "index", "title": "Knowledge base"}), "", "# Knowledge base", ""]
    children: dict[str | None, list[IndexEntry]] = {}
    for entry in entries:
        children.setdefault(entry.parent_id, []).append(entry)
    stack = [(e, 0) for e in reversed(sorted(children.get(None, []), key=lambda e: e.name))]
    listed = 0
    while stack:
        entry, depth = stack.pop()
        indent = "  " * depth
        listed += 1
        if entry.kind == "folder":
            lines.append(f"{indent}- **{entry.name}/**")
            stack += [(c, depth + 1)
                      for c in reversed(sorted(children.get(entry.id, []), key=lambda e: e.name))]
        else:
            link = f"{indent}- [{entry.name}](./{page_file(entry.id)})"
            lines.append(f"{link} — {entry.description}" if entry.description else link)
    if not listed:
        lines.append("_No knowledge pages yet._")
    return "\n".join(lines) + "\n"


class LogEntry(NamedTuple):
    changed_at: str
    previous_content: str | None
    failure: str | None = None


def log_document(name: str, entries: Sequence[LogEntry]) -> str:
    """``<page>.log.md``: the page's history, newest first — each version's previous content,
    each failed refresh with its reason."""
    title = f"{name} — history"
    lines = [frontmatter({"type": "log", "title": title}), "", f"# {title}", ""]
    for entry in entries:
        lines += [f"## {entry.changed_at}", ""]
        if entry.failure is not None:
            lines.append(f"_Refresh failed: {entry.failure}_")
        else:
            lines.append((entry.previous_content or "").strip() or "_(empty)_")
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"
