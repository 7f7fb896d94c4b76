"""The import rules of DESIGN.md, read from the source: package directions, and no cycles between modules."""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("tracker", "feeds", "storage", "estimator")
# What each package may import of ours (besides itself). The CLI is the composition root: it alone wires
# feeds into the daemon. The stand-ins are servers for tests and the demo; the CLI's demo starts them.
ALLOWED = {
    "storage": set(),
    "estimator": set(),
    "feeds": {"storage"},
    "tracker": {"storage", "estimator"},
}
COMPOSITION_ROOTS = ("tracker.cli",)


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _sources() -> dict[str, Path]:
    modules = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            if "histories" in path.parts or "migrations" in path.parts:
                continue
            modules[_module_name(path)] = path
    return modules


MODULES = _sources()


def _imports(name: str, path: Path) -> set[str]:
    """Every module of ours that `name` imports, at any depth of the file (lazy and type-only imports too)."""
    tree = ast.parse(path.read_text(), str(path))
    is_package = path.name == "__init__.py"
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = name.split(".")
                base = base[: len(base) - node.level + (1 if is_package else 0)]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            targets = [f"{module}.{alias.name}" if f"{module}.{alias.name}" in MODULES else module for alias in node.names]
        else:
            continue
        for target in targets:
            while target and target not in MODULES:
                target = target.rpartition(".")[0]
            if target and target != name:
                found.add(target)
    return found


@functools.cache
def _graph() -> dict[str, set[str]]:
    """Every module's imports of ours: every file parsed once a worker, when a test first asks (not at collection)."""
    return {name: _imports(name, path) for name, path in MODULES.items()}


def test_the_source_was_read():
    """The rules below are checked over every product module (a wrong root would check nothing)."""
    assert len(MODULES) > 120
    assert {"tracker.cli", "feeds.http.app", "storage.db", "estimator.api"} <= MODULES.keys()
    assert sum(len(edges) for edges in _graph().values()) > 300


def _violations(graph: dict[str, set[str]], package: str) -> list[str]:
    """The imports of `package`'s modules that the rules do not allow."""
    wrong = []
    for name, edges in graph.items():
        if name.split(".")[0] != package:
            continue
        allowed = ALLOWED[package] | {package}
        if name.startswith(COMPOSITION_ROOTS):
            allowed = allowed | {"feeds"}
        wrong += [f"{name} -> {edge}" for edge in sorted(edges) if edge.split(".")[0] not in allowed]
    return wrong


def test_violations_are_found():
    """The checker itself: storage importing tracker and feeds importing tracker are named; the CLI may import feeds."""
    graph = {"storage.db": {"tracker.config"}, "feeds.views.page": {"storage.db", "tracker.cli.app"}, "tracker.cli.x": {"feeds.http"}}
    assert _violations(graph, "storage") == ["storage.db -> tracker.config"]
    assert _violations(graph, "feeds") == ["feeds.views.page -> tracker.cli.app"]
    assert _violations(graph, "tracker") == []
    assert _violations({"tracker.pipeline.ingest": {"feeds.views.feed"}}, "tracker") == ["tracker.pipeline.ingest -> feeds.views.feed"]


@pytest.mark.parametrize("package", PACKAGES)
def test_packages_import_in_one_direction(package):
    """storage and estimator import nothing of ours, feeds only storage, tracker storage and estimator
    (its CLI, the composition root, also feeds)."""
    assert _violations(_graph(), package) == []


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components = []
    counter = 0
    for start in graph:
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, edges = work[-1]
            for edge in edges:
                if edge not in index:
                    index[edge] = low[edge] = counter
                    counter += 1
                    stack.append(edge)
                    on_stack.add(edge)
                    work.append((edge, iter(sorted(graph[edge]))))
                    break
                if edge in on_stack:
                    low[node] = min(low[node], index[edge])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        components.append(sorted(component))
    return components


def _without_packages(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """Edges into a package's __init__ from its own modules are how Python loads them, not a loop of ours:
    a package that re-exports its modules is left out when its modules are checked."""
    return {name: {e for e in edges if not name.startswith(e + ".")} for name, edges in graph.items()}


def test_cycle_finder_finds_a_cycle():
    """The finder itself: a three-module loop is found, a chain is not."""
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": set()}) == []


def test_no_module_imports_itself_back():
    """No two modules import each other, directly or around a loop, not even for types or lazily."""
    assert _cycles(_without_packages(_graph())) == []


# The rooms of tracker/, from the top floor down (DESIGN.md's layout, docs/architecture.md's picture). A module
# imports its own room or a room on a lower floor, never one above: a lower room gets what it needs passed in
# (polling is handed the ingest, the listing and the family check by tracker/cli/builder.py and App).
TRACKER_FLOORS = (
    ("cli",),
    ("pins",),
    ("family",),
    ("pipeline",),
    ("hub", "advisories"),
    ("polling", "differs"),
    ("config", "revision"),
    ("formats", "corpus"),
    ("errors", "standins"),
)
ROOT_FACE = ("tracker", "tracker.__main__")


def _room(name: str) -> str:
    return name.split(".")[1]


def _floor_of(room: str) -> int:
    for floor, rooms in enumerate(TRACKER_FLOORS):
        if room in rooms:
            return floor
    raise KeyError(room)


def _upward(graph: dict[str, set[str]]) -> list[str]:
    """The imports between tracker's rooms that run back up a floor (or reach a room the floors do not name)."""
    wrong = []
    for name, edges in graph.items():
        if not name.startswith("tracker.") or name in ROOT_FACE:
            continue
        for edge in sorted(edges):
            if not edge.startswith("tracker.") or _room(edge) == _room(name):
                continue
            if _floor_of(_room(edge)) <= _floor_of(_room(name)):
                wrong.append(f"{name} -> {edge}")
    return wrong


def test_upward_imports_are_found():
    """The checker itself: polling importing the ingest or the Hub client is named; the pipeline importing polling is not."""
    graph = {"tracker.polling.poller": {"tracker.pipeline.ingest", "tracker.polling.outcome"},
             "tracker.polling.listing": {"tracker.hub.client"}, "tracker.pipeline.ingest": {"tracker.polling.outcome"}}
    assert _upward(graph) == ["tracker.polling.poller -> tracker.pipeline.ingest", "tracker.polling.listing -> tracker.hub.client"]


def test_every_room_has_a_floor():
    """Each folder and module directly under tracker/ is a room the floors name: a new room is placed on purpose."""
    rooms = {_room(name) for name in MODULES if name.startswith("tracker.") and name not in ROOT_FACE}
    named = {room for floor in TRACKER_FLOORS for room in floor}
    assert rooms == named


def test_tracker_rooms_import_only_downwards():
    """No import in tracker/ runs back up a floor, not even for types or lazily (polling never imports the ingest,
    the snapshot reader or the Hub client above it)."""
    assert _upward(_graph()) == []


def test_tracker_root_holds_only_its_face_and_the_exception_tree():
    """The 18 loose modules went into rooms: tracker/ itself holds its face, `python -m tracker` and errors.py."""
    loose = sorted(path.name for path in (ROOT / "tracker").glob("*.py"))
    assert loose == ["__init__.py", "__main__.py", "errors.py"]
