"""The docs stay true to the API they describe.

- A sentence of the docs that says something is missing ("not built", "not yet", "selects
  nothing", "when they land", …) must not name, in backticks, anything the OpenAPI document
  exposes: a path, an operation id, a parameter, a schema field or an enum value. When a feature
  lands, the sentence that said it was missing fails here until it is rewritten. The few
  "missing" sentences that are true of an exposed name (a parameter accepted for upstream's
  clients whose data this server never has) are listed below with the reason.
- Every ``METHOD /path`` docs/api.md names is a route of the OpenAPI document.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from tests.test_openapi import document as _openapi_document

ROOT = Path(__file__).resolve().parent.parent
DOCS = (ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")))
API_PREFIX = "/v1/default"
document = _openapi_document  # the OpenAPI document: test_openapi's fixture, under its name

MISSING = re.compile(
    r"not built|not (?:yet )?implemented|not yet|when (?:it|they) lands?|comes? later|"
    r"not supported|unsupported|is missing|are missing|selects nothing|no such (?:route|endpoint)",
    re.IGNORECASE,
)
# (exposed name, the words of the sentence that must stay with it): true "missing" claims.
ALLOWED = {
    # The memory list accepts upstream's filters on data this server never holds.
    ("state", "invalidated"): "no memory is ever invalidated here (no invalidate route)",
    ("invalidated", "invalidated"): "the same sentence",
    ("entity_id", "entities"): "entities are kept as text, not as linked entity rows",
}


def _sentences(text: str) -> list[str]:
    text = re.sub(r"```.*?```", " ", text, flags=re.DOTALL)  # code blocks make no claims
    text = re.sub(r"\s+", " ", text)
    # Clauses: a claim is about the names next to it, not about the whole paragraph.
    return re.split(r"(?<=[.!?;])\s+|\),\s+|\s+-\s+|\|", text)


def _walk(node: Any, names: set[str]) -> None:
    if isinstance(node, dict):
        for key, value in node.items():
            if key in ("properties",) and isinstance(value, dict):
                names.update(value)
            if key == "enum" and isinstance(value, list):
                names.update(str(v) for v in value)
            if key in ("operationId", "name") and isinstance(value, str):
                names.add(value)
            _walk(value, names)
    elif isinstance(node, list):
        for item in node:
            _walk(item, names)


@pytest.fixture(scope="module")
def exposed(document: dict[str, Any]) -> set[str]:
    names: set[str] = set()
    for path in document["paths"]:
        names.add(path)
        names.add(path.removeprefix(API_PREFIX))
    _walk(document, names)
    return names


def test_no_sentence_calls_missing_what_the_openapi_document_exposes(exposed: set[str]) -> None:
    wrong = []
    for doc in DOCS:
        for sentence in _sentences(doc.read_text()):
            if not MISSING.search(sentence):
                continue
            for token in re.findall(r"`([^`]+)`", sentence):
                name = token.split("=")[0].strip()
                name = re.sub(r"^(GET|POST|PUT|PATCH|DELETE)\s+", "", name)
                if name not in exposed:
                    continue
                if any(name == allowed and word in sentence for allowed, word in ALLOWED):
                    continue
                wrong.append(f"{doc.name}: `{token}` is exposed, yet: {sentence.strip()[:300]}")
    assert not wrong, "\n".join(wrong)


def test_the_guard_catches_the_sentences_it_exists_for(exposed: set[str]) -> None:
    # Two claims once found false, as they read before they were corrected.
    stale = ("otherwise fails with `refresh_failed_delta_not_applied` / `delta_not_applied` "
             "(delta operations are not built yet) rather than rewriting the document.",
             "`consolidation_state` (`pending|done|failed`; `failed` selects nothing: "
             "consolidation records no failure here),")
    for sentence in stale:
        [part] = [s for s in _sentences(sentence) if MISSING.search(s)]
        assert any(t.split("=")[0] in exposed for t in re.findall(r"`([^`]+)`", part)), part


def test_every_route_docs_api_names_is_in_the_openapi_document(document: dict[str, Any]) -> None:
    routes = {(method.upper(), path.removeprefix(API_PREFIX))
              for path, item in document["paths"].items() for method in item
              if method in ("get", "post", "put", "patch", "delete")}
    named = re.findall(r"`(GET|POST|PUT|PATCH|DELETE) ((?:/v1/default)?/banks[^`\s?]*)",
                       (ROOT / "docs" / "api.md").read_text())
    assert named
    missing = sorted({(m, p.removeprefix(API_PREFIX)) for m, p in named} - routes)
    assert not missing, missing
