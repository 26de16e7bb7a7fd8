"""The repository layout keeps its promises: one distribution, a namespace package split over three folders,
and no folder that shadows the standard library's ``operator`` module."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def run_python(code: str, cwd: Path) -> str:
    result = subprocess.run([sys.executable, "-c", code], cwd=cwd, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


def test_import_operator_from_the_repository_root_is_the_standard_library() -> None:
    out = run_python("import operator; print(operator.__file__); print(operator.itemgetter(1)([5, 7]))", ROOT)
    path, item = out.splitlines()
    assert item == "7"
    assert Path(path).parent == Path(sys.base_prefix, "lib", f"python{sys.version_info.major}.{sys.version_info.minor}")
    assert not path.startswith(str(ROOT))


def test_the_three_portions_of_berth_import_from_anywhere(tmp_path: Path) -> None:
    out = run_python(
        "import berth.coordinator, berth.operator, berth.pipeline, berth;"
        "print(sorted(p.split('/')[-2] for p in berth.__path__))",
        tmp_path,
    )
    assert out == "['coordinator', 'operator', 'pipeline']"


def test_no_init_file_makes_berth_a_regular_package() -> None:
    for portion in ("coordinator", "operator", "pipeline"):
        assert not (ROOT / portion / "berth" / "__init__.py").exists()
        assert (ROOT / portion / "berth" / portion / "__init__.py").exists()
    assert not (ROOT / "operator" / "__init__.py").exists()


def test_console_scripts_are_installed() -> None:
    bin_dir = Path(sys.executable).parent
    for script in ("berth-coordinator", "berth-operator", "berth-analyze", "berth-demo", "berth-groups"):
        assert (bin_dir / script).exists(), script


def test_every_module_the_makefile_runs_exists_and_every_benchmark_it_names_is_registered() -> None:
    """``make soak`` and ``make bench`` run outside ``make test``; a renamed module must still fail a test."""
    import importlib.util
    import re

    from benchmarks.__main__ import BENCHMARKS

    makefile = (ROOT / "Makefile").read_text()
    modules = re.findall(r"python -m ([\w.]+)((?: [a-z_]+)*)", makefile)
    assert modules, "no python -m lines found in the Makefile"
    for module, names in modules:
        assert importlib.util.find_spec(module) is not None, f"Makefile runs missing module {module}"
        if module == "benchmarks":
            for name in names.split():
                assert name in BENCHMARKS, f"Makefile runs unknown benchmark {name!r}"
    for module in BENCHMARKS.values():
        assert importlib.util.find_spec(module) is not None, f"benchmark module {module} is missing"


def test_every_dependency_is_pinned_and_the_venv_holds_the_pinned_version() -> None:
    """constraints.txt pins what make install and the images install: every requirement of pyproject.toml (its
    extras included) has a pin there, and the venv under test holds exactly that version (a dependency's new
    release reaches the suite only through ``make constraints``)."""
    import importlib.metadata
    import tomllib

    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    pins = {}
    for line in (ROOT / "constraints.txt").read_text().splitlines():
        if line and not line.startswith("#"):
            name, _, version = line.partition("==")
            assert version, f"constraints.txt: {line!r} is not a pin (name==version)"
            pins[canonicalize_name(name)] = version
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    requirements = [
        *project["dependencies"],
        *(r for extra in project["optional-dependencies"].values() for r in extra),
    ]
    for text in requirements:
        requirement = Requirement(text)
        name = canonicalize_name(requirement.name)
        if name == "berth" or (requirement.marker is not None and not requirement.marker.evaluate()):
            continue
        assert name in pins, f"{requirement.name} (pyproject.toml) has no pin in constraints.txt: make constraints"
        assert requirement.specifier.contains(pins[name], prereleases=True), f"{name}=={pins[name]} is outside {text!r}"
        installed = importlib.metadata.version(name)
        assert installed == pins[name], f"the venv has {name} {installed}, constraints.txt pins {pins[name]}"


def test_every_skip_in_the_tests_goes_through_the_one_that_fails_under_ci() -> None:
    """A skipped test hides that it never ran: CI (CI=true) must fail instead (``support.ci.unavailable``), and a
    test that can never run is not written (no skip, skipif, importorskip or xfail anywhere else)."""
    import re

    allowed = ROOT / "tests" / "support" / "tiers" / "ci.py"
    pattern = re.compile(r"pytest\.skip\(|mark\.skip|skipif|importorskip|xfail")
    found = [
        f"{path.relative_to(ROOT)}:{number}"
        for path in sorted((ROOT / "tests").rglob("*.py"))
        if path != allowed and path != Path(__file__)
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if pattern.search(line)
    ]
    assert found == []


def test_test_support_modules_are_importable_by_name_from_any_folder_and_named_once() -> None:
    import support

    folders = [Path(entry) for entry in support.__path__]
    names = [path.stem for folder in folders for path in folder.glob("*.py") if path.name != "__init__.py"]
    assert len(names) == len(set(names)), sorted(name for name in names if names.count(name) > 1)
    assert {path.name for path in (ROOT / "tests" / "support").iterdir() if path.is_dir()} >= set(support.FOLDERS)
