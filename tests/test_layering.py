"""The packages stack one way, clevr_game < players < envs < agents < benchmarks < experiments, perf.

Every `import` and `from ... import` counts, at module level or inside a function
(and under TYPE_CHECKING): a module may import its own floor or lower ones, never a
higher one, and no two or three modules may import each other round. The command line
(`clevr_game/cli.py`) is the one module that sees every package. A package that is not
there yet is simply absent.

    python tests/test_layering.py    # prints every upward import and every circle
"""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

LAYERS = {"clevr_game": 0, "players": 1, "envs": 2, "agents": 3, "benchmarks": 4, "experiments": 5, "perf": 5}
EXEMPT = frozenset({"clevr_game.cli"})
LOWER_FLOORS = ("clevr_game", "players", "envs", "agents")
UPPER_FLOORS = ("benchmarks", "experiments", "perf")


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@cache
def _modules() -> dict[str, Path]:
    return {_module_name(path): path for package in LAYERS if (REPO / package).is_dir()
            for path in sorted((REPO / package).rglob("*.py"))}


def _owner(name: str, modules: dict[str, Path]) -> str | None:
    """The project module `name` imports: itself, or the package it lies in (`pkg.mod.function` -> `pkg.mod`)."""
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


@cache
def import_graph() -> dict[str, dict[str, int]]:
    """module -> {project module it imports: first line that does}."""
    modules = _modules()
    graph: dict[str, dict[str, int]] = {}
    for module, path in modules.items():
        targets: dict[str, int] = {}
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                # `from pkg import mod` imports the module pkg.mod; `from pkg.mod import name`, pkg.mod.
                names = [f"{node.module}.{alias.name}" for alias in node.names]
            else:
                continue
            for name in names:
                target = _owner(name, modules)
                if target is not None and target != module:
                    targets.setdefault(target, node.lineno)
        graph[module] = targets
    return graph


def _package(module: str) -> str:
    return module.partition(".")[0]


def upward_imports(package: str) -> list[str]:
    """`module:line -> target` for every import from `package` into a higher floor."""
    found = []
    for module, targets in import_graph().items():
        if _package(module) != package or module in EXEMPT:
            continue
        for target, line in sorted(targets.items()):
            if LAYERS[_package(target)] > LAYERS[package]:
                found.append(f"{module}:{line} -> {target}")
    return found


def circles(package: str) -> list[str]:
    """Every circle of two or three modules with at least one module in `package`."""
    graph = import_graph()
    found = set()
    for first, targets in graph.items():
        for second in targets:
            if first in graph.get(second, {}):
                found.add(tuple(sorted((first, second))))
            for third in graph.get(second, {}):
                if third not in (first, second) and first in graph.get(third, {}):
                    found.add(tuple(sorted((first, second, third))))
    return [" <-> ".join(circle) for circle in sorted(found)
            if any(_package(module) == package for module in circle)]


@pytest.mark.parametrize("package", LOWER_FLOORS + UPPER_FLOORS)
def test_no_package_imports_a_higher_floor(package: str) -> None:
    assert upward_imports(package) == []


@pytest.mark.parametrize("package", [*LOWER_FLOORS, "benchmarks", "experiments", "perf"])
def test_no_modules_import_each_other_round(package: str) -> None:
    assert circles(package) == []


def test_the_walk_sees_every_floor_and_imports_inside_functions() -> None:
    graph = import_graph()
    assert {_package(module) for module in graph} >= set(LOWER_FLOORS)
    assert "players.pixel.commands" in graph["players.commands"]  # imported inside _cmd_train
    assert "clevr_game.scene" in graph["clevr_game.items"]  # `from clevr_game.scene import ...`
    assert "clevr_game.asp" in graph["envs.poc_items"]  # a name of the package's lazy __init__


if __name__ == "__main__":
    for package in LAYERS:
        for line in upward_imports(package):
            print("upward:", line)
    for circle in sorted({c for package in LAYERS for c in circles(package)}):
        print("circle:", circle)


@pytest.mark.parametrize("package", ["benchmarks", "experiments"])
def test_every_module_of_the_benchmark_and_the_experiments_reads_top_to_bottom(package: str) -> None:
    long = {str(path.relative_to(REPO)): count for path in sorted((REPO / package).rglob("*.py"))
            if (count := len(path.read_text(encoding="utf-8").splitlines())) > 500}
    assert long == {}, "split these modules by what they do (at most 500 lines each)"
