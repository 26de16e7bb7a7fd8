"""Each image's install, done for real: the Dockerfile's venv stages run here as they are written (only /opt/berth
and /dist point at temporary folders), then every entry point does its real work in the venv it ships in.

No container engine runs here, so the test runs the very RUN lines of the ``runtime-venv`` and ``analytics-venv``
stages against the wheel built from this checkout, each in a fresh venv, with pip's cache allowed (the images
build without one). Then:
- runtime (coordinator, operator, berth-groups): no Spark, Java-bound or plotting package is installed; a
  coordinator serves ``/readyz``; ``berth-groups`` lists its groups; ``berth-operator --help`` answers; and
  ``berth-analyze`` says in one line that it needs the pipeline extra;
- analytics: ``berth-analyze`` analyses berth-demo's journal, report included (matplotlib), exactly as the chart's
  CronJob runs it, and also without the report.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from chart_helpers import ROOT
from support.net import free_port
from test_chart_dockerfile import Stage, parse_dockerfile

pytestmark = [pytest.mark.slow]

DEMO_JOURNAL = ROOT / "tests" / "pipeline" / "data" / "demo-journal"
NOT_IN_RUNTIME = ("pyspark", "py4j", "pyarrow", "pandas", "matplotlib", "numpy")


def stage(name: str) -> Stage:
    _args, stages = parse_dockerfile((ROOT / "Dockerfile").read_text())
    return next(s for s in stages if s.name == name)


@pytest.fixture(scope="module")
def wheel_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel stage's ``pip wheel --no-deps --wheel-dir /dist .``, built from this checkout."""
    dist = tmp_path_factory.mktemp("dist")
    (command,) = stage("wheel").all("RUN")
    assert command == "pip wheel --no-deps --wheel-dir /dist ."
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "--wheel-dir",
            str(dist),
            str(ROOT),
        ],
        check=True,
        capture_output=True,
    )
    return dist


def install_as_the_image_does(stage_name: str, wheel_dir: Path, venv: Path) -> str:
    """Run the stage's RUN line with /opt/berth -> ``venv`` and /dist -> ``wheel_dir``; the command, for errors."""
    (command,) = stage(stage_name).all("RUN")
    local = command.replace("/opt/berth", str(venv)).replace("/dist", str(wheel_dir))
    local = re.sub(r"^python -m venv", f"{sys.executable} -m venv", local)
    environment = {**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1", "PIP_NO_INPUT": "1"}
    result = subprocess.run(["sh", "-c", local], env=environment, capture_output=True, text=True, check=False)
    assert result.returncode == 0, f"{local}\n{result.stderr[-4000:]}"
    return local


def missing_modules(venv: Path, modules: tuple[str, ...]) -> list[str]:
    probe = "import importlib.util, sys; print(' '.join(m for m in sys.argv[1:] if importlib.util.find_spec(m)))"
    found = subprocess.run([venv / "bin" / "python", "-c", probe, *modules], capture_output=True, text=True, check=True)
    return found.stdout.split()


@pytest.fixture
def coordinator(tmp_path: Path, runtime_venv: Path) -> Iterator[str]:
    port = free_port()
    command = [runtime_venv / "bin" / "berth-coordinator", "--data-dir", tmp_path / "data", "--host", "127.0.0.1"]
    process = subprocess.Popen([*map(str, command), "--port", str(port)], stderr=subprocess.PIPE)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                with urllib.request.urlopen(f"{url}/readyz", timeout=1) as response:
                    if response.status == 200:
                        break
            except OSError:
                pass
            assert process.poll() is None, process.stderr.read().decode() if process.stderr else ""
            assert time.monotonic() < deadline, "the coordinator never answered /readyz"
            time.sleep(0.2)
        yield url
    finally:
        process.terminate()
        process.wait(timeout=20)


@pytest.fixture(scope="module")
def runtime_venv(wheel_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    venv = tmp_path_factory.mktemp("runtime") / "opt-berth"
    install_as_the_image_does("runtime-venv", wheel_dir, venv)
    return venv


@pytest.fixture(scope="module")
def analytics_venv(wheel_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    venv = tmp_path_factory.mktemp("analytics") / "opt-berth"
    install_as_the_image_does("analytics-venv", wheel_dir, venv)
    return venv


def test_the_runtime_image_has_no_spark_and_runs_the_services(
    runtime_venv: Path, coordinator: str, tmp_path: Path
) -> None:
    assert missing_modules(runtime_venv, NOT_IN_RUNTIME) == []  # pip install berth pulls no Spark

    listed = subprocess.run(
        [runtime_venv / "bin" / "berth-groups", "--coordinator", coordinator, "--output", "json", "list"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert listed.returncode == 0, listed.stderr
    assert json.loads(listed.stdout) == {"groups": []}
    operator = subprocess.run([runtime_venv / "bin" / "berth-operator", "--help"], capture_output=True, check=False)
    assert operator.returncode == 0
    analyze = subprocess.run(
        [runtime_venv / "bin" / "berth-analyze", "--journal", DEMO_JOURNAL, "--out", tmp_path / "out"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert analyze.returncode == 1
    assert analyze.stderr.startswith(
        "berth-analyze: error: the analytics job needs Berth's pipeline extra (pip install 'berth[pipeline]', or the "
        "berth-analytics image): "
    )
    assert analyze.stderr.count("\n") == 1


def test_the_analytics_image_analyses_a_real_journal_with_and_without_the_report(
    analytics_venv: Path, tmp_path: Path
) -> None:
    environment = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"}
    analyze = [str(analytics_venv / "bin" / "berth-analyze"), "--journal", str(DEMO_JOURNAL), "--master", "local[1]"]
    with_report, without = tmp_path / "with-report", tmp_path / "without"

    full = subprocess.run([*analyze, "--out", str(with_report)], env=environment, capture_output=True, text=True)
    assert full.returncode == 0, full.stderr[-3000:]
    bare = subprocess.run(
        [*analyze, "--out", str(without), "--no-report"], env=environment, capture_output=True, text=True
    )
    assert bare.returncode == 0, bare.stderr[-3000:]

    advice = json.loads((with_report / "advice.json").read_text())
    assert advice["groups"]["orders"]["restart_gap_p_ms"] == 662
    assert (with_report / "report.html").read_text().count("<svg") >= 5
    assert sorted(p.name for p in without.iterdir()) == ["advice.json", "summary.parquet"]
