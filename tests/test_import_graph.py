"""The project's import graph: no cycles, and layers pointing one way (CONVENTIONS).

Built from the source with ``ast`` (nothing is imported), over every module of the project's own
packages, counting top-level imports *and* imports inside functions, methods and ``if`` blocks, so
a cycle can't hide behind a function-level import. ``tests`` and migrations are left out: they sit
above everything. ``benchmarks`` is in the graph, on top: it may import every app, nothing imports it,
and only the benchmarks' own tests import it.

Layers, lowest first: ``api`` (the API framework) ← ``core`` (identity) ← ``brain`` ← ``quality`` /
``tasks`` ← ``web`` / ``colony_mcp`` ← ``runtime`` (the processes). ``config`` is the
project shell (settings, urls, the Celery app); it may import every app, and no app may import
``config`` (settings are read through ``django.conf.settings``).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
EXCLUDED = {"tests", "docs", "templates", "var"}

LAYER = {
    "api": 0,
    "contrib": 0,
    "core": 1,
    "brain": 2,
    "quality": 3,
    "tasks": 3,
    "web": 4,
    "colony_mcp": 4,
    "runtime": 5,
    "config": 6,
    "benchmarks": 7,
}
"""An app may import apps of a lower layer only (same layer: not each other). ``colony_mcp`` is an
interface like ``web``; ``contrib`` holds agent-side scripts, which import nothing of Colony."""


LEAVES = {"config.env"}
"""Modules every layer may import because they import nothing of the project themselves: the typed
settings reader (``manage.py`` and the process launchers in ``core`` read the environment with it
before Django's settings exist)."""


def project_packages() -> list[str]:
    """Every top-level folder of the project that holds Python code, except tests."""
    return sorted(
        path.name
        for path in ROOT.iterdir()
        if path.is_dir() and path.name not in EXCLUDED and not path.name.startswith(".") and any(path.rglob("*.py"))
    )


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def project_modules() -> dict[str, Path]:
    modules = {}
    for package in project_packages():
        for path in (ROOT / package).rglob("*.py"):
            if "migrations" in path.parts:
                continue
            modules[_module_name(path)] = path
    return modules


def _resolve(name: str, modules: dict[str, Path]) -> str | None:
    """The longest project module that ``name`` (a dotted import target) is or lies inside."""
    while name:
        if name in modules:
            return name
        name = name.rpartition(".")[0]
    return None


def imports_of(module: str, path: Path, modules: dict[str, Path]) -> dict[str, int]:
    """The project modules ``module`` imports anywhere in its file, with the first line of each."""
    tree = ast.parse(path.read_text(), filename=str(path))
    is_package = path.name == "__init__.py"
    found: dict[str, int] = {}
    for node in ast.walk(tree):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".")
                base = base if is_package else base[:-1]
                base = base[: len(base) - (node.level - 1)]
                prefix = ".".join(base + ([node.module] if node.module else []))
            else:
                prefix = node.module or ""
            # ``from brain.services import memory`` imports the module brain.services.memory;
            # ``from brain.models import Thought`` the module brain.models.
            targets = [
                f"{prefix}.{alias.name}" if f"{prefix}.{alias.name}" in modules else prefix for alias in node.names
            ]
        for target in targets:
            resolved = _resolve(target, modules)
            if resolved is not None and resolved != module:
                found.setdefault(resolved, node.lineno)
    return found


def build_graph() -> dict[str, dict[str, int]]:
    modules = project_modules()
    # Edges are the import statements only: importing brain.services.x also runs
    # brain/services/__init__.py, but that is not counted (every __init__ here is empty or a re-export).
    return {name: imports_of(name, path, modules) for name, path in modules.items()}


def find_cycles(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """Every strongly connected component with more than one module (Tarjan), as a sorted list."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []
    counter = 0

    def visit(start: str) -> None:
        nonlocal counter
        work = [(start, iter(graph[start]))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            advanced = False
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(graph[child])))
                    advanced = True
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            if advanced:
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
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

    for name in sorted(graph):
        if name not in index:
            visit(name)
    return sorted(components)


def layer_violations(graph: dict[str, dict[str, int]]) -> list[str]:
    bad = []
    for module, targets in sorted(graph.items()):
        app = module.split(".")[0]
        for target, line in sorted(targets.items()):
            target_app = target.split(".")[0]
            if target_app == app or target in LEAVES:
                continue
            if LAYER[target_app] >= LAYER[app]:
                bad.append(f"{module} (line {line}) imports {target}: {app} may not import {target_app}")
    return bad


def test_every_package_has_a_layer():
    """A new top-level package must say where it sits before the layer rule can check it."""
    assert set(project_packages()) <= set(LAYER), f"give these a layer in LAYER: {set(project_packages()) - set(LAYER)}"


def test_leaves_import_nothing_of_the_project():
    graph = build_graph()
    assert {leaf: graph[leaf] for leaf in LEAVES} == {leaf: {} for leaf in LEAVES}


def test_the_graph_sees_function_level_imports_and_real_edges():
    graph = build_graph()
    # A sanity check that the walker reads what it claims to: known edges of the project.
    assert "brain.models" in graph["brain.services.thoughts"]
    assert "api.errors" in graph["brain.services.thoughts"]
    assert "benchmarks.setup" in graph["benchmarks.run"]
    assert len(graph) > 80


def test_the_cycle_finder_finds_a_cycle_hidden_in_a_function():
    graph = {"a": {"b": 1}, "b": {"c": 3}, "c": {"a": 9}, "d": {"a": 1}}
    assert find_cycles(graph) == [["a", "b", "c"]]
    assert find_cycles({"a": {"b": 1}, "b": {}}) == []


def test_a_function_level_import_is_an_edge(tmp_path):
    source = tmp_path / "m.py"
    source.write_text("def f():\n    from brain.services import thoughts\n    return thoughts\n")
    modules = project_modules()
    assert imports_of("core.m", source, modules) == {"brain.services.thoughts": 2}


def test_no_import_cycle_between_project_modules():
    cycles = find_cycles(build_graph())
    assert cycles == [], (
        "import cycles (each line one cycle; break them, a function-level import counts):\n"
        + "\n".join(" ↔ ".join(cycle) for cycle in cycles)
    )


def test_layers_point_one_way():
    violations = layer_violations(build_graph())
    assert violations == [], "imports from a lower layer into a higher one (core ← brain ← quality, tasks ← web):\n" + (
        "\n".join(violations)
    )


@pytest.mark.parametrize(
    ("importer", "imported", "allowed"),
    [
        ("brain.x", "core.y", True),
        ("core.x", "brain.y", False),
        ("brain.x", "quality.y", False),
        ("quality.x", "tasks.y", False),
        ("web.x", "tasks.y", True),
        ("tasks.x", "web.y", False),
        ("core.x", "config.y", False),
        ("benchmarks.x", "config.y", True),
        ("web.x", "benchmarks.y", False),
    ],
)
def test_the_layer_rule(importer, imported, allowed):
    assert (layer_violations({importer: {imported: 1}}) == []) is allowed


def test_no_management_command_imports_an_api_module():
    """The CLIs share input validation and services with the REST API, never its views."""
    graph = build_graph()
    commands = [module for module in graph if ".management.commands." in module]
    assert "brain.management.commands.brain" in commands
    bad = [
        f"{module} (line {line}) imports {target}"
        for module in sorted(commands)
        for target, line in sorted(graph[module].items())
        if target.split(".")[1:2] == ["apis"]
    ]
    assert bad == [], "management commands import API modules (use brain.inputs or the services):\n" + "\n".join(bad)


def test_only_the_benchmarks_tests_import_benchmark_code():
    """Product tests stand on the product: a helper both need lives in ``tests/`` or in the product."""
    modules = project_modules()
    bad = [
        f"{path.relative_to(ROOT)} (line {line}) imports {target}"
        for path in sorted((ROOT / "tests").rglob("*.py"))
        if not path.name.startswith(("test_benchmarks_", "test_retrieval_")) and "benchmarks" not in path.parts
        for target, line in sorted(imports_of(_module_name(path), path, modules).items())
        if target.split(".")[0] == "benchmarks"
    ]
    assert bad == [], "product tests importing benchmark code:\n" + "\n".join(bad)
