"""The planners stay pure: no Kubernetes, HTTP, asyncio, environment or clock inside them (checked on the source)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import berth.operator.planners as planners_package
import berth.operator.spec.checks as spec_checks_module
import berth.operator.spec.declaration as spec_declaration_module
import berth.operator.spec.fleet as spec_module
import berth.operator.spec.stateful as spec_stateful_module

SPEC_MODULES = (spec_module, spec_checks_module, spec_stateful_module, spec_declaration_module)
SOURCES = [
    *sorted(Path(planners_package.__file__).parent.glob("*.py")),
    *(Path(module.__file__) for module in SPEC_MODULES),
]
FORBIDDEN_MODULES = {"kopf", "kubernetes", "aiohttp", "asyncio", "time", "os", "socket", "subprocess", "random"}
CLOCK_READS = {"now", "utcnow", "today", "time", "monotonic"}


def imported_modules(tree: ast.AST) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


@pytest.mark.parametrize("source", SOURCES, ids=lambda path: path.name)
def test_a_planner_module_imports_no_io_and_reads_no_clock(source: Path) -> None:
    tree = ast.parse(source.read_text(), filename=str(source))

    assert imported_modules(tree) & FORBIDDEN_MODULES == set()
    clock_reads = [
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in CLOCK_READS
    ]
    assert clock_reads == [], f"{source.name} reads the clock on lines {clock_reads}: take `now` as a parameter"
    assert not any(isinstance(node, ast.AsyncFunctionDef | ast.Await) for node in ast.walk(tree))
