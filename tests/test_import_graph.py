"""No import circle between the service's modules, counting the imports made only for type
checking and those inside functions: a circle hidden under ``TYPE_CHECKING`` still means two
modules that can only be read together. The layers themselves are import-linter's contracts
(``pyproject.toml``); this checks what a layers contract cannot see, a circle inside one layer."""

from __future__ import annotations

import grimp

PACKAGES = ("hindsight", "mentalmodels", "operations")


def import_circles(graph: grimp.ImportGraph) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan's algorithm, iterative)."""
    order: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles: list[list[str]] = []
    for root in sorted(graph.modules):
        if root in order:
            continue
        work = [(root, iter(sorted(graph.find_modules_directly_imported_by(root))))]
        order[root] = low[root] = len(order)
        stack.append(root)
        on_stack.add(root)
        while work:
            module, imported = work[-1]
            step = next(imported, None)
            if step is not None:
                if step not in order:
                    order[step] = low[step] = len(order)
                    stack.append(step)
                    on_stack.add(step)
                    work.append((step, iter(sorted(graph.find_modules_directly_imported_by(step)))))
                elif step in on_stack:
                    low[module] = min(low[module], order[step])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[module])
            if low[module] == order[module]:
                group = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.append(member)
                    if member == module:
                        break
                if len(group) > 1:
                    circles.append(sorted(group))
    return circles


def test_no_module_imports_itself_through_others_even_for_type_checking() -> None:
    graph = grimp.build_graph(*PACKAGES, include_external_packages=False,
                              exclude_type_checking_imports=False)
    assert import_circles(graph) == []


def test_the_circle_finder_finds_a_circle_hidden_under_type_checking() -> None:
    graph = grimp.ImportGraph()
    for module in ("a", "a.trace", "a.attempt", "a.pipeline"):
        graph.add_module(module)
    graph.add_import(importer="a.attempt", imported="a.trace")
    graph.add_import(importer="a.trace", imported="a.attempt")  # the TYPE_CHECKING import
    graph.add_import(importer="a.pipeline", imported="a.attempt")
    assert import_circles(graph) == [["a.attempt", "a.trace"]]
