"""The reconcile service keeps the shape that lets features be added to it without reaching into one another
(docs/architecture.md, "The pass"): steps take one value (the pass's scope) and at most three more parameters;
nothing in it remembers across passes but the per-fleet memory; the status step is a fold over one contributor per
feature, small enough to read, and every contributor in the package is in the fold."""

from __future__ import annotations

import ast
import dataclasses
import importlib
import pkgutil
from pathlib import Path

import berth.operator.reconcile as reconcile
import berth.operator.reconcile.contributors as contributors
from berth.operator.reconcile import status
from berth.operator.reconcile.memory import FleetMemory

ROOT = Path(reconcile.__file__).parent
#: What runs passes rather than being one: the work queue, the reconciler around it and the journal's follower.
SCHEDULING = {"queue.py", "reconciler.py", "journal_follower.py"}


def functions(path: Path) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
    tree = ast.parse(path.read_text())
    return [node for node in ast.walk(tree) if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)]


def parameters(node: ast.FunctionDef | ast.AsyncFunctionDef) -> list[str]:
    args = node.args
    named = [a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs)]
    named += [f"*{a.arg}" for a in (args.vararg, args.kwarg) if a is not None]
    return [name for name in named if name not in ("self", "cls")]


def pass_modules() -> list[Path]:
    return [path for path in sorted(ROOT.rglob("*.py")) if path.name not in SCHEDULING]


def test_no_function_of_the_pass_takes_more_than_four_parameters() -> None:
    wide = [
        f"{path.relative_to(ROOT)}:{node.lineno} {node.name}({', '.join(parameters(node))})"
        for path in pass_modules()
        for node in functions(path)
        if len(parameters(node)) > 4
    ]
    assert wide == []


def test_the_status_step_is_a_short_fold() -> None:
    path = Path(status.__file__)
    assert len(path.read_text().splitlines()) < 120
    for module in (path, *sorted(Path(contributors.__file__).parent.glob("*.py"))):
        lines = {node.name: (node.end_lineno or node.lineno) - node.lineno + 1 for node in functions(module)}
        assert max(lines.values(), default=0) <= 40, (module.name, lines)


def test_every_contributor_module_is_folded_once() -> None:
    names = {info.name for info in pkgutil.iter_modules(contributors.__path__)} - {"base"}
    folded = [f"{c.__module__.rsplit('.', 1)[1]}.{c.__name__}" for c in status.CONTRIBUTORS]
    assert sorted(folded) == sorted(f"{name}.contribute" for name in names)
    assert len(set(folded)) == len(folded)


def test_only_the_fleet_memory_remembers_across_passes() -> None:
    """Every dataclass of the service is frozen but the fleet's memory; no module keeps a mutable global."""
    for info in pkgutil.walk_packages(reconcile.__path__, "berth.operator.reconcile."):
        module = importlib.import_module(info.name)
        for name, value in vars(module).items():
            if name.startswith("__"):
                continue
            if isinstance(value, type) and value.__module__ == info.name and dataclasses.is_dataclass(value):
                params = value.__dataclass_params__  # type: ignore[attr-defined]
                assert params.frozen or value is FleetMemory, value
            assert not isinstance(value, dict | set | list), (info.name, value)
