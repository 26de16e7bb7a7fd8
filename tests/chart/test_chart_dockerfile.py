"""The Dockerfile and .dockerignore, checked by reading them (no container engine runs here), and the wheel the
builder stage builds, built for real."""

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
def stages() -> list[Stage]:
    return parse_dockerfile((ROOT / "Dockerfile").read_text())[1]


def test_multi_stage_build_from_the_same_slim_python(stages: list[Stage]) -> None:
    assert len(stages) == 2
    builder, final = stages
    assert builder.name == "builder"
    # The virtualenv's interpreter links only work when both stages have the same Python at the same path.
    assert builder.base == final.base
    assert re.fullmatch(r"python:3\.11-slim(-bookworm)?", final.base), final.base


def test_builder_builds_a_wheel_and_installs_it_with_the_pipeline_extra(stages: list[Stage]) -> None:
    run = " && ".join(stages[0].all("RUN"))
    assert "pip wheel" in run and "--no-deps" in run
    assert re.search(r"/opt/berth/bin/pip install [^&]*berth-\*\.whl\)?\[pipeline\]", run), run
    assert "python -m venv /opt/berth" in run
    # The console scripts must at least start (imports resolve) before the image is done.
    for script in ("berth-coordinator", "berth-operator", "berth-analyze"):
        assert f"/opt/berth/bin/{script} --help" in run
    copied = {shlex.split(args)[0] for args in stages[0].all("COPY")}
    assert {"coordinator/", "operator/", "pipeline/", "pyproject.toml"} <= copied


def test_final_stage_runs_as_a_non_root_numeric_user(stages: list[Stage]) -> None:
    users = stages[1].all("USER")
    assert users, "no USER in the final stage"
    uid, _, gid = users[-1].partition(":")
    assert uid.isdigit() and int(uid) > 0, "USER must be a non-root numeric UID (runAsNonRoot checks it)"
    assert not gid or (gid.isdigit() and int(gid) > 0)
    # The chart's default runAsUser is the image's user, so a data volume's fsGroup and the UID agree.
    for name, spec in pod_specs(render_default()):
        assert spec["securityContext"]["runAsUser"] == int(uid), name


def render_default() -> list[dict[str, object]]:
    return render({"analytics": {"enabled": True}})


def test_final_stage_has_java_17_and_no_build_tools(stages: list[Stage]) -> None:
    run = " ".join(stages[1].all("RUN"))
    assert "openjdk-17-jre-headless" in run
    assert "--no-install-recommends" in run and "rm -rf /var/lib/apt/lists" in run
    installed = " ".join(re.findall(r"apt-get install ([^&;]+)", run)).split()
    assert not [tool for tool in BUILD_TOOLS if tool in installed], installed
    assert not any("pip install" in args for args in stages[1].all("RUN")), "nothing is built in the final stage"
    copies = stages[1].all("COPY")
    assert copies == ["--from=builder /opt/berth /opt/berth"], "only the virtualenv comes from the builder"
    env = " ".join(stages[1].all("ENV"))
    assert "PATH=/opt/berth/bin:$PATH" in env and "JAVA_HOME=" in env


def test_entrypoint_runs_any_console_script(stages: list[Stage]) -> None:
    """ENTRYPOINT is only tini, so the container's arguments name the program (the chart sets `args`)."""
    (entrypoint,) = stages[1].all("ENTRYPOINT")
    assert json.loads(entrypoint) == ["/usr/bin/tini", "--"]
    (cmd,) = stages[1].all("CMD")
    default = json.loads(cmd)
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert default[0] in scripts
    assert {"berth-coordinator", "berth-operator", "berth-analyze"} <= scripts.keys()
    used = {c["args"][0] for _, spec in pod_specs(render_default()) for c in spec["containers"]}
    assert used == {"berth-coordinator", "berth-operator", "berth-analyze"}


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
    """What the builder's `pip wheel --no-deps .` produces: one berth namespace, the three services' scripts."""
    if importlib.util.find_spec("hatchling") is None:
        pytest.skip("hatchling (the build backend) is not installed in this environment; the image build fetches it")
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
