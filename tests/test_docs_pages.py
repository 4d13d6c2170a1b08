"""The README and docs/ stay a house a newcomer can read: short README, every page linked, links
that resolve, nothing pointing outside the repository, and the names they cite still in the code.

- docs/configuration.md is what ``hindsight.infra.config.configuration_markdown`` writes from the
  ``Config`` dataclass, and names every variable ``read_config`` reads.
- Every module, file and ``module.function`` docs/internals.md names in backticks exists; every
  repository path any page names exists.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hindsight.infra import config as config_module

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DOCS = sorted((ROOT / "docs").glob("*.md"))
PAGES = [README, *DOCS]
# The top-level folders of the repository a page may cite by path.
TOP_LEVEL = ("hindsight", "mentalmodels", "operations", "tests", "bench", "fakes", "docs",
             "examples")
# The importable packages of the project (dotted names are checked from these).
PACKAGES = ("hindsight", "mentalmodels", "operations", "tests", "bench", "fakes")


def test_the_readme_is_short_and_starts_with_the_two_commands() -> None:
    lines = README.read_text().splitlines()
    assert len(lines) <= 200, len(lines)
    head = "\n".join(lines[:40])
    assert "make run" in head and "make test" in head


@pytest.mark.parametrize("page", DOCS, ids=lambda p: p.name)
def test_every_docs_page_is_linked_from_the_readme(page: Path) -> None:
    assert f"](docs/{page.name}" in README.read_text(), f"README.md does not link docs/{page.name}"


# Requirement ids of the documents the project was specified in, and those documents: the pages
# state each rule in the project's own words instead.
OUTSIDE = re.compile(r"\b(?:SPEC|RF|OP|MM|DL|KB)-?[0-9]+\b|SPEC[ ]section|\b(?:SPEC|DESIGN|STYLE)\b|"
                     r"/work/|\bissue \d+")


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_no_page_points_outside_the_repository(page: Path) -> None:
    found = [f"{page.name}:{n}: {line.strip()}" for n, line in
             enumerate(page.read_text().splitlines(), 1) if OUTSIDE.search(line)]
    assert not found, "\n".join(found)


def github_anchor(heading: str) -> str:
    """The id GitHub gives a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    seen: dict[str, int] = {}
    result = set()
    text = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)
    for heading in re.findall(r"^#{1,6} (.+)$", text, re.M):
        anchor = github_anchor(heading)
        count = seen.get(anchor, 0)
        seen[anchor] = count + 1
        result.add(anchor if count == 0 else f"{anchor}-{count}")
    return result


def links(page: Path) -> Iterator[tuple[str, str]]:
    text = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if re.match(r"[a-z]+:", target):  # http(s): a page elsewhere on purpose (upstream)
            continue
        path, _, anchor = target.partition("#")
        yield path, anchor


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_relative_link_resolves_to_a_file_and_heading(page: Path) -> None:
    broken = []
    for path, anchor in links(page):
        target = (page.parent / path).resolve() if path else page
        if not target.exists():
            broken.append(f"{path}: no such file")
        elif anchor and target.suffix == ".md" and anchor not in anchors(target):
            broken.append(f"{path}#{anchor}: no such heading in {target.name}")
    assert not broken, f"{page.name}: " + "; ".join(broken)


def backticked(page: Path) -> list[str]:
    return re.findall(r"`([^`\n]+)`", page.read_text())


# A folder (``a/b/``) or a file (``a/b.py``, ``a/b``); ``a/b.name`` (a name in a file) is
# internals.md's own check below.
REPO_PATH = re.compile(rf"^(?:{'|'.join(TOP_LEVEL)})/[\w/-]*(?:\.(?:py|md|toml|mjs|json|yml|txt))?/?$")


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_repository_path_a_page_names_exists(page: Path) -> None:
    missing = sorted({token for token in backticked(page)
                      if REPO_PATH.match(token) and "…" not in token
                      and not (ROOT / token.rstrip("/")).exists()})
    assert not missing, f"{page.name} names paths that do not exist: {missing}"


# --- docs/internals.md: every module and function it names exists -----------------------------

INTERNALS = ROOT / "docs" / "internals.md"
# a.b.c, a/b/c.py, a/b/, a/b.c (a file then a name in it); a trailing call's parentheses are
# dropped (``f()``, ``f(x, y=…)``).
DOTTED = re.compile(r"^[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+$")
SLASHED = re.compile(r"^[a-z_][\w/]*/(?:[\w]+(?:\.py)?)?(?:\.[A-Za-z_]\w*)*$")


def _project_modules() -> dict[str, list[str]]:
    """Module name by its last part: ``engine`` → ["operations.engine"]."""
    found: dict[str, list[str]] = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            if "migrations" in path.parts or "node_modules" in path.parts:
                continue
            parts = path.relative_to(ROOT).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found.setdefault(parts[-1], []).append(".".join(parts))
    return found


MODULES = _project_modules()


def _resolve(module_name: str, attributes: list[str]) -> str | None:
    """None when ``module_name`` imports and has the attributes in turn; else what is wrong."""
    try:
        value: Any = importlib.import_module(module_name)
    except ImportError as exc:
        return f"{module_name} does not import ({exc})"
    for name in attributes:
        if not hasattr(value, name):
            try:  # a submodule not imported by its package
                value = importlib.import_module(f"{value.__name__}.{name}")
                continue
            except (ImportError, AttributeError):
                return f"{module_name} has no {'.'.join(attributes)}"
        value = getattr(value, name)
    return None


def _check_dotted(token: str) -> str | None:
    if token.endswith(".py"):  # a file by its name alone: some package has it
        known = token.removesuffix(".py") in MODULES or (ROOT / token).exists()
        return None if known else f"{token}: no such file"
    head, *rest = token.split(".")
    if head in PACKAGES:
        # The longest importable prefix is the module; the rest are attributes.
        parts = token.split(".")
        for cut in range(len(parts), 0, -1):
            name = ".".join(parts[:cut])
            if (ROOT / Path(*parts[:cut])).with_suffix(".py").exists() or \
                    (ROOT / Path(*parts[:cut]) / "__init__.py").exists():
                return _resolve(name, parts[cut:])
        return f"{token}: no such module"
    candidates = MODULES.get(head, [])
    if len(candidates) != 1 or not rest:
        return None  # not a module of ours by that short name (an object, a setting): prose
    return _resolve(candidates[0], rest)


def _check_slashed(token: str) -> str | None:
    """``a/b/`` a folder; ``a/b.py`` a file; ``a/b.name`` the file a/b.py, then a name in it —
    from the repository's root or from any package folder (``refresh/plan.py``)."""
    bases = (ROOT, *BASES)
    if token.endswith("/"):
        folder = token.rstrip("/")
        return None if any((base / folder).is_dir() for base in bases) else f"{token}: no such folder"
    folder, _, last = token.rpartition("/")
    stem, names = (last[:-3], []) if last.endswith(".py") else (last.split(".")[0], last.split(".")[1:])
    relative = f"{folder}/{stem}"
    files = [f for base in bases for f in (base / f"{relative}.py", base / relative / "__init__.py")
             if f.exists()]
    if not files:
        return f"{token}: no such file"
    module = ".".join(files[0].relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
    return _resolve(module, names) if names else None


# Where a path relative to a package is looked for: every package folder of the project.
BASES = sorted({path.parent for package in PACKAGES for path in (ROOT / package).rglob("__init__.py")
                if "node_modules" not in path.parts})


def internals_names() -> list[str]:
    names = []
    for token in backticked(INTERNALS):
        token = re.sub(r"\((?:[^()]*)\)$", "", token.strip())  # a call: its name
        if DOTTED.match(token) or SLASHED.match(token):
            names.append(token)
    return sorted(set(names))


def test_docs_internals_names_only_modules_and_functions_that_exist() -> None:
    names = internals_names()
    assert len(names) > 50, names  # the guard reads the page (the pattern still matches)
    wrong = []
    for token in names:
        problem = _check_slashed(token) if "/" in token else _check_dotted(token)
        if problem:
            wrong.append(problem)
    assert not wrong, "\n".join(wrong)


def test_the_internals_guard_catches_a_moved_module() -> None:
    assert _check_slashed("mentalmodels/handlers.py") is not None
    assert _check_dotted("mentalmodels.refresh_types.RefreshOutcome") is not None
    assert _check_dotted("operations.leases.no_such_function") is not None
    assert _check_slashed("refresh/plan.no_such_function") is not None
    assert _check_dotted("operations.leases.operation_claim") is None
    assert _check_slashed("refresh/plan.refresh_plan") is None


# --- docs/configuration.md: generated from the Config dataclass -------------------------------

CONFIGURATION = ROOT / "docs" / "configuration.md"


class _Recording(dict[str, str]):
    """An environment that remembers every variable the reader asked for."""

    def __init__(self, values: dict[str, str], seen: set[str]) -> None:
        super().__init__(values)
        self.seen = seen

    def get(self, key: str, default: Any = None) -> Any:  # type: ignore[override]
        self.seen.add(key)
        return super().get(key, default)


def variables_read_config_reads() -> set[str]:
    seen: set[str] = set()
    p = config_module.ENV_PREFIX
    # Each branch of the reader: the local and the OpenAI embeddings, with and without an LLM.
    for env in ({}, {p + "LLM_PROVIDER": "openai", p + "EMBEDDINGS_PROVIDER": "openai",
                     p + "LLM_TOKEN_BUDGET_PER_DAY": "10"}):
        config_module.read_config(_Recording(env, seen))
    return seen


def test_docs_configuration_names_every_variable_the_config_reads() -> None:
    page = CONFIGURATION.read_text()
    read = variables_read_config_reads()
    assert len(read) > 40, read
    missing = sorted(v for v in read if f"`{v}`" not in page)
    assert not missing, f"docs/configuration.md lacks {missing}: {config_module.PAGE_COMMAND}"


def test_every_variable_the_config_reads_is_documented_on_its_field() -> None:
    documented = {v for f in config_module.documented_fields() for v in f.metadata["variables"]}
    assert variables_read_config_reads() == documented


def test_docs_configuration_is_what_the_config_generates() -> None:
    assert CONFIGURATION.read_text() == config_module.configuration_markdown(), (
        f"docs/configuration.md is out of date: {config_module.PAGE_COMMAND}")


def test_each_documented_default_is_what_an_empty_environment_reads() -> None:
    empty = config_module.read_config({})
    assert not empty.errors
    for f in config_module.documented_fields():
        assert getattr(empty, f.name) == f.default, f.name
