"""The shared words live in ``hindsight.infra.vocabulary`` only: it imports nothing of Django or
the project (the CLI and the stdio MCP server read it without either), and no product module
spells one of its word lists out again."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

from hindsight.infra import vocabulary

ROOT = Path(__file__).resolve().parent.parent
PRODUCT = ("hindsight", "mentalmodels", "operations")
VOCABULARY = Path("hindsight/infra/vocabulary.py")

# A literal list naming this many words of one set is a copy of that set (fewer is a rule about
# one or two words, such as tagscope's ``match in ("any", "any_strict")``).
WORD_SETS: dict[str, tuple[frozenset[str], int]] = {
    "fact types": (frozenset(vocabulary.FACT_TYPES), 2),
    "tags_match modes": (frozenset(vocabulary.TAGS_MATCH_MODES), 3),
    "strict tags_match modes": (frozenset({"any_strict", "all_strict"}), 2),
    "budgets": (frozenset(vocabulary.BUDGETS), 2),
    "based_on keys": (frozenset({"mental-models", "directives"}), 2),
    "refresh modes": (frozenset(vocabulary.REFRESH_MODES), 2),
    "operation statuses": (frozenset(status.value for status in vocabulary.OperationStatus), 3),
}


def _product_files() -> Iterator[Path]:
    for package in PRODUCT:
        for path in sorted((ROOT / package).rglob("*.py")):
            relative = path.relative_to(ROOT)
            if "migrations" not in relative.parts and relative != VOCABULARY:
                yield relative


def _strings(node: ast.Tuple | ast.List | ast.Set) -> set[str]:
    return {e.value for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)}


def _is_iso_format(node: ast.AST | None) -> bool:
    """``x.isoformat()``, alone or as a branch of ``… if … else …``: a timestamp format."""
    if isinstance(node, ast.IfExp):
        return _is_iso_format(node.body) or _is_iso_format(node.orelse)
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and node.func.attr == "isoformat")


def _copies(source: str) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Tuple | ast.List | ast.Set):
            words = _strings(node)
            for name, (wordset, enough) in WORD_SETS.items():
                if len(words & wordset) >= enough:
                    found.append(f"line {node.lineno}: the {name} {sorted(words & wordset)}")
        if isinstance(node, ast.Return) and _is_iso_format(node.value):
            found.append(f"line {node.lineno}: the ISO timestamp format")
    return found


def test_the_vocabulary_imports_neither_django_nor_the_project() -> None:
    # Loaded from its file, not through the ``hindsight`` package, whose __init__ starts the
    # Celery app (and so Django) whatever module below it is asked for.
    script = (
        "import importlib.util, json, sys\n"
        "before = set(sys.modules)\n"
        f"spec = importlib.util.spec_from_file_location('vocabulary', {str(ROOT / VOCABULARY)!r})\n"
        "module = importlib.util.module_from_spec(spec)\n"
        "spec.loader.exec_module(module)\n"
        "assert module.FactType.WORLD == 'world'\n"
        "print(json.dumps(sorted(set(sys.modules) - before)))\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    loaded = json.loads(out.stdout)
    assert [m for m in loaded if m.split(".")[0] in (*PRODUCT, "django")] == []
    assert {m.split(".")[0] for m in loaded} <= sys.stdlib_module_names


def test_no_product_module_spells_out_a_word_list_of_the_vocabulary() -> None:
    copies = {str(path): found for path in _product_files()
              if (found := _copies((ROOT / path).read_text()))}
    assert copies == {}, "import these from hindsight.infra.vocabulary instead"


def test_the_check_finds_a_copy() -> None:
    copy = 'FACT_TYPES = ("world", "experience")\nMODES = ["any", "all", "exact"]\n'
    helper = "def iso(v):\n    return v.isoformat() if v is not None else None\n"
    assert len(_copies(copy)) == 2
    assert _copies(helper) == ["line 2: the ISO timestamp format"]
    assert _copies('if match in ("any", "any_strict"):\n    pass\n') == []
