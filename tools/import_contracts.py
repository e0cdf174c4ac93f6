"""An import-linter contract that no module imports itself back, through any path.

The layers contract (pyproject.toml, ``[tool.importlinter]``) keeps imports pointing down between
layers; this one finds the cycles inside a layer too. Every import counts: module level, inside a
function (lazy), and under ``TYPE_CHECKING``. A broken contract lists each cycle as a chain of
modules with the line of each import, so the one to remove is plain to see.
"""

from __future__ import annotations

from collections.abc import Iterator

import grimp
from importlinter import Contract, ContractCheck, fields, output


def strongly_connected(graph: grimp.ImportGraph, modules: set[str]) -> Iterator[list[str]]:
    """The groups of two or more modules that import each other, directly or not (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    counter = 0
    for root in sorted(modules):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.find_modules_directly_imported_by(root) & modules)))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.find_modules_directly_imported_by(child) & modules))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                group = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.append(member)
                    if member == node:
                        break
                if len(group) > 1:
                    yield sorted(group)


class NoCyclesContract(Contract):
    """``type = no_cycles``; ``packages``: the packages whose modules may form no import cycle."""

    type_name = "no_cycles"
    packages = fields.ListField(subfield=fields.StringField())

    def check(self, graph: grimp.ImportGraph, verbose: bool) -> ContractCheck:
        roots: tuple[str, ...] = tuple(self.packages)  # type: ignore[arg-type]
        modules = {m for m in graph.modules if m in roots or m.startswith(tuple(r + "." for r in roots))}
        cycles = []
        for group in strongly_connected(graph, modules):
            chain = _cycle_through(graph, group[0], set(group))
            cycles.append([(a, b, _lines(graph, a, b)) for a, b in zip(chain, chain[1:])])
        return ContractCheck(kept=not cycles, metadata={"cycles": cycles})

    def render_broken_contract(self, check: ContractCheck) -> None:
        for number, cycle in enumerate(check.metadata["cycles"], 1):
            output.print_error(f"Import cycle {number}:", bold=True)
            for importer, imported, lines in cycle:
                output.indent_cursor()
                output.print_error(f"{importer} -> {imported} (l. {lines})")
            output.new_line()


def _cycle_through(graph: grimp.ImportGraph, start: str, members: set[str]) -> list[str]:
    """One cycle from ``start`` back to itself inside ``members`` (a breadth-first search)."""
    parents: dict[str, str] = {}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for child in sorted(graph.find_modules_directly_imported_by(node) & members):
                if child == start:  # node closes the cycle: walk back from it to start
                    back = [node]
                    while back[-1] != start:
                        back.append(parents[back[-1]])
                    return [*reversed(back), start]
                if child not in parents:
                    parents[child] = node
                    following.append(child)
        frontier = following
    return [start, start]


def _lines(graph: grimp.ImportGraph, importer: str, imported: str) -> str:
    details = graph.get_import_details(importer=importer, imported=imported)
    return ", ".join(str(d["line_number"]) for d in details) or "?"
