"""The import contracts deny by default (docs/architecture.md, "Import contracts"): a module added anywhere that
imports what its place may not — a Kafka client, Kopf, an adapter from a pure layer or the service, the demo wing
from the product — or a module added at the operator's top level without a place in its layers, fails
``lint-imports``. Each case adds one such module to a copy of the tree (a test checkout) and runs the real
``lint-imports`` there; the copy without it passes."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PORTIONS = ("coordinator", "operator", "pipeline")
LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"

#: (where the module goes, what it says, a contract that must break).
WRONG = [
    pytest.param(
        "operator/berth/operator/planners/wire_shortcut.py",
        "import kafka\n",
        "Kafka clients are imported only by the Kafka adapters",
        id="a-planner-importing-kafka",
    ),
    pytest.param(
        "operator/berth/operator/reconcile/contributors/gauges.py",
        "from berth.operator.adapters import metrics\n",
        "Only the composition roots (and berth-operator's entry point) import the operator's adapters",
        id="a-contributor-importing-an-adapter",
    ),
    pytest.param(
        "operator/berth/operator/spec/kopf_defaults.py",
        "import kopf\n",
        "Kopf is imported only by the operator's handlers",
        id="the-spec-importing-kopf",
    ),
    pytest.param(
        "operator/berth/operator/ports/tuning.py",
        "import time\n",
        "The operator's pure layers (planners, ports, spec) do no I/O",
        id="a-port-reading-the-clock",
    ),
    pytest.param(
        "operator/berth/operator/helpers.py",
        '"""A loose module at the operator\'s top level."""\n',
        "The operator is layered by folder",
        id="a-loose-top-level-module",
    ),
    pytest.param(
        "operator/berth/operator/extras/__init__.py",
        "from berth.operator.local import demo\n",
        "Nothing imports the local/demo wing",
        id="a-new-folder-importing-the-demo-wing",
    ),
    pytest.param(
        "coordinator/berth/coordinator/core/kafka_bridge.py",
        "import kafka\n",
        "Kafka clients are imported only by the Kafka adapters",
        id="the-coordinator-core-importing-kafka",
    ),
]


@pytest.fixture(scope="module")
def checkout(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tree's three portions and its pyproject.toml (the contracts), copied."""
    copy = tmp_path_factory.mktemp("checkout")
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for portion in PORTIONS:
        shutil.copytree(ROOT / portion, copy / portion, ignore=ignore)
    shutil.copy2(ROOT / "pyproject.toml", copy / "pyproject.toml")
    return copy


def lint_imports(checkout: Path) -> subprocess.CompletedProcess[str]:
    """The real lint-imports on the copy (its portions first on the path, so the copy is what is analysed)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(str(checkout / portion) for portion in PORTIONS)}
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache"], cwd=checkout, env=env, capture_output=True, text=True, timeout=300
    )


def test_the_copy_as_it_is_keeps_every_contract(checkout: Path) -> None:
    result = lint_imports(checkout)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


@pytest.mark.parametrize(("where", "source", "contract"), WRONG)
def test_a_wrong_import_added_anywhere_fails_lint_imports(
    checkout: Path, where: str, source: str, contract: str
) -> None:
    module = checkout / where
    created = [parent for parent in reversed(module.parents) if not parent.exists()]
    for folder in created:
        folder.mkdir()
    module.write_text(source)
    try:
        result = lint_imports(checkout)
    finally:
        module.unlink()
        for folder in reversed(created):
            shutil.rmtree(folder)
    assert result.returncode != 0, result.stdout
    assert verdict(result.stdout, contract) == "BROKEN", result.stdout


def verdict(report: str, contract: str) -> str:
    """What lint-imports' summary says of the contract whose name starts with ``contract``: KEPT or BROKEN."""
    summary = " ".join(report.split())  # the report wraps long names over lines
    after = summary[summary.index(contract) :]
    kept, broken = after.find(" KEPT"), after.find(" BROKEN")
    return "BROKEN" if broken != -1 and (kept == -1 or broken < kept) else "KEPT"


def test_the_architecture_document_names_every_contract_once() -> None:
    """docs/architecture.md's table of import contracts has one row per contract, named as pyproject.toml names it
    (up to its first colon or parenthesis)."""
    import re
    import tomllib

    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    document = (ROOT / "docs" / "architecture.md").read_text()
    table = document[document.index("## Import contracts") :].split("\n## ")[0]
    rows = [line for line in table.splitlines() if line.startswith("| ") and not line.startswith("| contract ")]
    assert len(rows) == len(contracts)
    for contract in contracts:
        named = re.split(r":| \(", contract["name"])[0]
        assert sum(row.startswith(f"| {named}") for row in rows) == 1, named
