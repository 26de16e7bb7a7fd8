"""Fixtures shared by every test area: real coordinator processes and an HTTP session to talk to them."""

from __future__ import annotations

import os
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import aiohttp
import pytest
from support.api import Api
from support.coordinator import CoordinatorProcess

os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")

#: The real control plane (etcd, kube-apiserver, kube-controller-manager), the Kafka broker, the etcd cluster of the
#: replicated coordinator and the real node (kubelet, containerd, images built from the Dockerfile), each started
#: once when a test first asks; and which tests share a worker under ``make test``'s ``pytest -n 2``.
pytest_plugins = [
    "support.kube_fixtures",
    "support.kafka_fixtures",
    "support.ha_fixtures",
    "support.node_fixtures",
    "support.worker_groups",
]


@pytest.fixture
def coordinator(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[CoordinatorProcess]:
    """A fresh coordinator process with the manual clock, on its own data directory."""
    proc = CoordinatorProcess(tmp_path / "data")
    proc.start()
    yield proc
    if request.node.rep_call.failed if hasattr(request.node, "rep_call") else False:
        print(proc.stderr())
    if proc.proc is not None and proc.proc.poll() is None:
        proc.kill()


@pytest.fixture
async def api(coordinator: CoordinatorProcess) -> AsyncIterator[Api]:
    async with aiohttp.ClientSession() as session:
        yield Api(session, coordinator.url)


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    outcome = yield
    report = outcome.get_result()
    setattr(item, f"rep_{report.when}", report)


#: The session's exit status, kept for :func:`pytest_unconfigure`.
_EXIT_STATUS: list[int] = []


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    _EXIT_STATUS.append(int(exitstatus))


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config: pytest.Config) -> None:
    """Exit with the session's status once pytest has written everything, without the interpreter's finalization:
    one full run in three ended "Aborted" after its summary (a C extension's thread torn down at finalization; not
    found), which turned a run's result into a crash. Every fixture has been torn down before this point."""
    if _EXIT_STATUS and not hasattr(config, "workerinput"):  # a worker under pytest -n ends as xdist ends it
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(_EXIT_STATUS[-1])
