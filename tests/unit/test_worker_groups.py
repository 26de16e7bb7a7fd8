"""``support.worker_groups``: under ``pytest -n 2 --dist loadgroup`` the tests of one shared server run on one
worker, whatever module they are in, and every other module's tests stay together (a real pytest with two real
xdist workers, on a tree of its own)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

from support.kube_cluster import REPO

CONFTEST = """
import pytest

pytest_plugins = ["support.worker_groups"]


@pytest.fixture(scope="session")
def kube():
    return "a control plane"


@pytest.fixture(scope="session")
def etcd_cluster():
    return "an etcd cluster"
"""

#: Two modules with tests of each shared server between tests of their own, and a module of tests of its own only.
MODULE = """
def test_plane_{n}(kube): pass
def test_own_{n}_a(): pass
def test_etcd_{n}(etcd_cluster): pass
def test_own_{n}_b(): pass
def test_plane_again_{n}(kube): pass
"""
ALONE = "".join(f"def test_alone_{i}(): pass\n" for i in range(8))


def test_a_shared_servers_tests_share_one_worker_and_a_modules_the_rest(tmp_path: Path) -> None:
    (tmp_path / "conftest.py").write_text(CONFTEST)
    for n in range(3):
        (tmp_path / f"test_mixed_{n}.py").write_text(MODULE.format(n=n))
    (tmp_path / "test_alone.py").write_text(ALONE)
    env = {**os.environ, "PYTHONPATH": str(REPO / "tests")}
    argv = [sys.executable, "-m", "pytest", "-v", "-p", "no:cacheprovider", "-n", "2", "--dist", "loadgroup"]
    run = subprocess.run(
        [*argv, "--no-loadscope-reorder", "-c", os.devnull, "--rootdir", str(tmp_path), str(tmp_path)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    workers: dict[str, set[str]] = defaultdict(set)
    for worker, module, test in re.findall(r"\[(gw\d)\] .*PASSED (test_\w+)\.py::(\w+)", run.stdout):
        group = "kube" if "plane" in test else "etcd" if "etcd" in test else module
        workers[group].add(worker)
    assert set(workers) == {"kube", "etcd", "test_mixed_0", "test_mixed_1", "test_mixed_2", "test_alone"}, run.stdout
    assert all(len(ran_on) == 1 for ran_on in workers.values()), dict(workers)
    assert len(set().union(*workers.values())) == 2, "both workers took some of the groups"
    assert "scheduling tests via GroupScheduling" in run.stdout
