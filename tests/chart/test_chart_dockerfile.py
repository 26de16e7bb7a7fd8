"""The Dockerfile and .dockerignore, checked by reading them (no container engine runs here), and the wheel the
wheel stage builds, built for real (tests/node/test_images.py runs the built images as pods)."""

from __future__ import annotations

import fnmatch
import importlib.util
import json
import re
import shlex
import subprocess
import sys
import tomllib
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from chart_helpers import ROOT, pod_specs, render
from support.ci import unavailable

pytestmark = pytest.mark.tools

BUILD_TOOLS = ("gcc", "g++", "make", "build-essential", "git", "python3-dev", "libc6-dev", "cmake")


@dataclass
class Stage:
    base: str
    name: str | None
    instructions: list[tuple[str, str]] = field(default_factory=list)  # (INSTRUCTION, arguments)

    def all(self, instruction: str) -> list[str]:
        return [args for name, args in self.instructions if name == instruction]


def parse_dockerfile(text: str) -> tuple[dict[str, str], list[Stage]]:
    """Global ARG defaults and the stages, with continuation lines joined and comments dropped."""
    logical, current = [], ""
    for raw in text.splitlines():
        line = raw.strip()
        if not current and (not line or line.startswith("#")):
            continue
        if line.startswith("#"):  # a comment inside a continued instruction
            continue
        if line.endswith("\\"):
            current += line[:-1] + " "
            continue
        logical.append(current + line)
        current = ""
    args: dict[str, str] = {}
    stages: list[Stage] = []
    for line in logical:
        instruction, _, rest = line.partition(" ")
        instruction, rest = instruction.upper(), rest.strip()
        if instruction == "FROM":
            words = rest.split()
            base = re.sub(r"\$\{?(\w+)\}?", lambda m: args.get(m.group(1), m.group(0)), words[0])
            name = words[2] if len(words) == 3 and words[1].upper() == "AS" else None
            stages.append(Stage(base, name))
        elif not stages and instruction == "ARG":
            key, _, value = rest.partition("=")
            args[key] = value
        elif stages:
            stages[-1].instructions.append((instruction, rest))
    return args, stages


@pytest.fixture(scope="module")
def stages() -> dict[str, Stage]:
    by_name = {s.name: s for s in parse_dockerfile((ROOT / "Dockerfile").read_text())[1]}
    assert None not in by_name, "every stage is named"
    return {str(name): s for name, s in by_name.items()}


def test_two_images_from_one_wheel_the_slim_runtime_is_the_default_target(stages: dict[str, Stage]) -> None:
    assert list(stages) == ["wheel", "runtime-venv", "analytics-venv", "base", "analytics", "runtime"]
    python = {stages[n].base for n in ("wheel", "runtime-venv", "analytics-venv", "base")}
    # The virtualenv's interpreter links only work when every stage has the same Python at the same path.
    assert len(python) == 1 and re.fullmatch(r"python:3\.11-slim(-bookworm)?", python.pop())
    assert stages["analytics"].base == stages["runtime"].base == "base"


def test_the_wheel_is_built_once_and_installed_with_each_images_extras(stages: dict[str, Stage]) -> None:
    (build,) = stages["wheel"].all("RUN")
    assert "pip wheel" in build and "--no-deps" in build
    copied = {source for args in stages["wheel"].all("COPY") for source in shlex.split(args)[:-1]}
    assert {"coordinator/", "operator/", "pipeline/", "pyproject.toml", "constraints.txt"} <= copied
    (runtime,) = stages["runtime-venv"].all("RUN")
    (analytics,) = stages["analytics-venv"].all("RUN")
    assert "python -m venv /opt/berth" in runtime and "python -m venv /opt/berth" in analytics
    # The slim image gets the wheel alone (pip install berth pulls no Spark); the analytics one its pipeline extra.
    # Both at the versions make install's venv holds (constraints.txt, copied into /dist beside the wheel).
    assert "cp constraints.txt /dist/" in build
    pinned = r"/opt/berth/bin/pip install -c /dist/constraints\.txt "
    assert re.search(pinned + r'"\$\(ls /dist/berth-\*\.whl\)"', runtime), runtime
    assert re.search(pinned + r'"\$\(ls /dist/berth-\*\.whl\)\[pipeline\]"', analytics), analytics
    for script in ("berth-coordinator", "berth-operator", "berth-groups"):
        assert f"/opt/berth/bin/{script} --help" in runtime
    # tests/node/test_images.py runs the images these lines build, and each entry point's real work in them.
    assert "/opt/berth/bin/berth-analyze" in analytics


def test_images_run_as_a_non_root_numeric_user(stages: dict[str, Stage]) -> None:
    for name in ("analytics", "runtime"):
        users = stages[name].all("USER")
        assert users, f"no USER in {name}"
        uid, _, gid = users[-1].partition(":")
        assert uid.isdigit() and int(uid) > 0, "USER must be a non-root numeric UID (runAsNonRoot checks it)"
        assert not gid or (gid.isdigit() and int(gid) > 0)
        # The chart's default runAsUser is the image's user, so a data volume's fsGroup and the UID agree.
        for pod, spec in pod_specs(render_default()):
            assert spec["securityContext"]["runAsUser"] == int(uid), pod


def render_default() -> list[dict[str, object]]:
    return render({"analytics": {"enabled": True}})


def apt_installed(stage: Stage) -> list[str]:
    return " ".join(re.findall(r"apt-get install ([^&;]+)", " ".join(stage.all("RUN")))).split()


def test_java_only_in_the_analytics_image_and_no_build_tools_anywhere(stages: dict[str, Stage]) -> None:
    assert "openjdk-17-jre-headless" in apt_installed(stages["analytics"])
    for name in ("base", "runtime"):
        assert not [p for p in apt_installed(stages[name]) if "jdk" in p or "jre" in p], name
    for name in ("base", "analytics", "runtime"):
        run = " ".join(stages[name].all("RUN"))
        assert not [tool for tool in BUILD_TOOLS if tool in apt_installed(stages[name])], name
        if "apt-get install" in run:
            assert "--no-install-recommends" in run and "rm -rf /var/lib/apt/lists" in run, name
        assert "pip install" not in run, f"nothing is built in {name}"
    assert stages["analytics"].all("COPY") == ["--from=analytics-venv /opt/berth /opt/berth"]
    assert stages["runtime"].all("COPY") == ["--from=runtime-venv /opt/berth /opt/berth"]
    assert "PATH=/opt/berth/bin:$PATH" in " ".join(stages["base"].all("ENV"))
    assert "JAVA_HOME=" in " ".join(stages["analytics"].all("ENV"))


def test_entrypoint_runs_any_console_script(stages: dict[str, Stage]) -> None:
    """ENTRYPOINT is only tini, so the container's arguments name the program (the chart sets `args`)."""
    (entrypoint,) = stages["base"].all("ENTRYPOINT")
    assert json.loads(entrypoint) == ["/usr/bin/tini", "--"]
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    for name, program in (("runtime", "berth-coordinator"), ("analytics", "berth-analyze")):
        (cmd,) = stages[name].all("CMD")
        assert json.loads(cmd)[0] == program and program in scripts
    used = {c["args"][0] for _, spec in pod_specs(render_default()) for c in spec["containers"]}
    assert used == {"berth-coordinator", "berth-operator", "berth-analyze"}


def test_the_chart_runs_each_program_from_the_image_that_has_it() -> None:
    for _pod, spec in pod_specs(render_default()):
        for c in spec["containers"]:
            expected = "berth-analytics:0.1.0" if c["args"][0] == "berth-analyze" else "berth:0.1.0"
            assert c["image"] == expected, c["args"][0]


# --- .dockerignore ------------------------------------------------------------------------------------------------


def dockerignore_excludes(patterns: list[str], path: str) -> bool:
    """Docker's rule: the last pattern matching the path, or one of its parent directories, decides."""
    excluded = False
    parts = path.split("/")
    prefixes = ["/".join(parts[: i + 1]) for i in range(len(parts))]
    for pattern in patterns:
        negate = pattern.startswith("!")
        pattern = pattern.lstrip("!").rstrip("/")
        regex = re.escape(pattern).replace(r"\*\*/", "(.*/)?").replace(r"\*\*", ".*").replace(r"\*", "[^/]*")
        if any(re.fullmatch(regex, prefix) for prefix in prefixes) or fnmatch.fnmatch(path, pattern):
            excluded = not negate
    return excluded


@pytest.fixture(scope="module")
def ignore_patterns() -> list[str]:
    lines = (ROOT / ".dockerignore").read_text().splitlines()
    return [line.strip() for line in lines if line.strip() and not line.startswith("#")]


@pytest.mark.parametrize(
    "path",
    [
        "pyproject.toml",
        "README.md",
        "coordinator/berth/coordinator/core/group.py",
        "operator/berth/operator/spec.py",
        "pipeline/berth/pipeline/main.py",
    ],
)
def test_dockerignore_keeps_the_wheel_inputs(ignore_patterns: list[str], path: str) -> None:
    assert not dockerignore_excludes(ignore_patterns, path)


@pytest.mark.parametrize(
    "path",
    [
        ".venv/bin/python",
        ".tools/bin/helm",
        ".git/HEAD",
        "tests/chart/test_chart_dockerfile.py",
        "benchmarks/results/run.json",
        "coordinator/berth/coordinator/__pycache__/protocol.cpython-311.pyc",
        "operator/berth/operator/.mypy_cache/x.json",
        "Dockerfile",
    ],
)
def test_dockerignore_keeps_everything_else_out(ignore_patterns: list[str], path: str) -> None:
    assert dockerignore_excludes(ignore_patterns, path)


# --- the wheel the builder stage builds -------------------------------------------------------------------------


def test_wheel_builds_with_all_console_scripts_and_no_top_level_operator(tmp_path: Path) -> None:
    """What the wheel stage's `pip wheel --no-deps .` produces: one berth namespace, the services' scripts, and no
    benchmark tooling."""
    if importlib.util.find_spec("hatchling") is None:
        unavailable("hatchling (the build backend) is not installed in this environment; the image build fetches it")
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "--wheel-dir",
            str(tmp_path),
            str(ROOT),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    (wheel,) = tmp_path.glob("berth-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        entry_points = next(n for n in names if n.endswith("entry_points.txt"))
        scripts = archive.read(entry_points).decode()
    for script in ("berth-coordinator", "berth-operator", "berth-analyze"):
        assert re.search(rf"^{script} = berth\.", scripts, re.M), f"{script} missing from the wheel"
    for package in ("berth/coordinator/", "berth/operator/", "berth/pipeline/"):
        assert any(n.startswith(package) for n in names), package
    # `operator` is the standard library's: the wheel must not ship a top-level package of that name.
    assert not any(n.startswith("operator/") for n in names)
    assert not any("synthetic" in n for n in names), "benchmark journals are tooling, not product"
