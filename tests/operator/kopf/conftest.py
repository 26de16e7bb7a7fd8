"""Fixtures for the Kopf-level tests: the emulated API server (kmock), a kubeconfig pointing at it, a real
coordinator process on a real clock, the test's StatefulSet controller, real static members, and operators."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from kopf_apiserver import ApiServer
from kopf_controller import StatefulSetController
from kopf_harness import NAMESPACE, OperatorFactory, OperatorThread, call_failed, running_coordinator
from support.api import Api
from support.coordinator import CoordinatorProcess
from support.net import free_port

#: Operators under test reconcile often, so that waits (timers, retries) stay short.
RECONCILE_INTERVAL_S = "0.5"


@pytest.fixture
def kmock_options(kmock_options: dict[str, Any]) -> dict[str, Any]:
    """kmock's fixture, serving our emulator subclass."""
    return {**kmock_options, "cls": ApiServer}


@pytest.fixture
def apiserver(kmock: ApiServer) -> ApiServer:
    kmock.declare_resources()
    return kmock


@pytest.fixture
def kubeconfig(apiserver: ApiServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """KUBECONFIG naming the emulator: both the operator's client and Kopf must find it through the variable."""
    path = tmp_path / "kubeconfig"
    server = str(apiserver.url).rstrip("/")
    path.write_text(
        "apiVersion: v1\nkind: Config\n"
        f"clusters: [{{name: emulator, cluster: {{server: '{server}'}}}}]\n"
        "users: [{name: operator, user: {}}]\n"
        "contexts: [{name: emulator, context: {cluster: emulator, user: operator, namespace: shop}}]\n"
        "current-context: emulator\n"
    )
    monkeypatch.setenv("KUBECONFIG", str(path))
    # Not in a pod: make sure no service-account environment of the machine running the tests leaks in.
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.delenv("BERTH_TOKEN", raising=False)
    monkeypatch.delenv("BERTH_COORDINATOR_URL", raising=False)
    return path


@pytest.fixture
def coordinator(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[CoordinatorProcess]:
    with running_coordinator(tmp_path / "coordinator", lambda: call_failed(request)) as process:
        yield process


@pytest.fixture
async def session() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as client:
        yield client


@pytest.fixture
def api(session: aiohttp.ClientSession, coordinator: CoordinatorProcess) -> Api:
    return Api(session, coordinator.url)


@pytest.fixture
async def controller(apiserver: ApiServer) -> AsyncIterator[StatefulSetController]:
    async with StatefulSetController(apiserver, NAMESPACE).running() as running:
        yield running


@pytest.fixture
async def start_operator(kubeconfig: Path) -> AsyncIterator[OperatorFactory]:
    """Start an operator (``--namespace shop``, a short reconcile interval, plus ``extra`` flags); all that were
    started are stopped at the end."""
    started: list[OperatorThread] = []

    async def start(*extra: str, environ: dict[str, str] | None = None, namespaced: bool = True) -> OperatorThread:
        argv: list[str] = [
            "--liveness-port",
            "0",
            "--metrics-port",  # the harness counts passes from the operator's own counters (``passes_over``)
            str(free_port()),
            "--reconcile-interval-s",
            RECONCILE_INTERVAL_S,
            # A pass every second for every fleet, as a timer would: these tests are about what a pass does (and
            # that later passes do not do it again); what starts passes is tested on the real control plane.
            "--resync-interval-s",
            "1",
        ]
        if namespaced:
            argv += ["--namespace", NAMESPACE]
        operator = OperatorThread([*argv, *extra], environ)
        started.append(operator)
        return await operator.start()

    yield start
    for operator in started:
        if operator.thread.is_alive():
            await operator.stop()
