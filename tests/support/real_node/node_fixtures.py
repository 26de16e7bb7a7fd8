"""Pytest fixtures for the node tier (``pytest -m node``; loaded from the root conftest as a plugin).

Reusable by any test that wants Berth on real pods (coordinator failover, operator leader election, ...):

- ``node_images`` (session): ``{name: {"ref", "archive"}}`` of the images ``support.node_images`` builds from the
  Dockerfile (``runtime``, ``analytics``), ``deploy/examples/consumers/Dockerfile`` (``examples``), Debian's
  etcd-server (``etcd``) and the sandbox (``pause``). The build starts in a background process as soon as
  collection shows a node test, so the rest of the suite runs meanwhile; cached by content across runs.
- ``cluster`` (session): a ``support.node.Cluster`` (its own control plane, scheduler and PersistentVolumes) of one
  node so far: ``cluster.nodes``, ``cluster.node_of(pod)``, ``cluster.grow(n)``, ``cluster.replace(lost)``.
- ``node`` (session): the cluster's first ``support.node.Node`` (kubelet, containerd, kube-proxy, DNS) with every
  image imported. ``node.network`` has its addresses, ``node.log(NAME)`` the logs of its processes.
- ``three_nodes`` (session): the same cluster grown to three live nodes, one per zone (``zone-a``..``zone-c``). The
  tests that ask for it run after those that do not (``pytest_collection_modifyitems``), so the one-node tests
  see one node, and the two nodes more are started only in a session that has a test for them.
- ``node_kube`` (session): ``support.kube.Kube`` (kubectl and helm) as the node's cluster admin, CRD applied.
- ``berth_release`` (session): the chart installed exactly as docs/install.md says (``helm install berth
  charts/berth --namespace berth --create-namespace``, both rollouts, then a group token for ``orders*`` groups with
  ``helm upgrade --reuse-values``), every pod from the locally built images: a ``support.node_stage.Release``.
- ``ha_stage`` (session): that release moved to ``coordinator.ha`` as docs/high-availability.md says, with a fleet
  of example consumers running through the move (``support.node_ha``). The move is one-way, so the tests that use
  ``ha_stage`` run after every other test of the session (``pytest_collection_modifyitems``).

The node, the images and the release are made once per session **before** the first test that uses them starts
its timer (a ``pytest_runtest_protocol`` wrapper outside pytest-timeout's), so their set-up (minutes on a cold
cache) never counts against a test's timeout; they have their own budgets. Without the node's binaries, root or the
packages, the tier is skipped with one line saying how to get them; with ``CI=true`` that is a failure.

Before the build starts, the nodes that earlier runs killed with ``kill -9`` left behind (processes, network
namespace, mounts, work directory) are ended (``support.node_reap.reap_stale``); a live run's node never is.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest
from support.kube import Kube, find_tool
from support.kube_cluster import REPO, find_binaries
from support.kube_fixtures import CRD_DIR, CRD_NAME, unavailable
from support.node import HOW_TO_GET, Cluster, Node, missing_pieces
from support.node_ha import HaStage, moved_to_ha
from support.node_images import missing_tools as missing_build_tools
from support.node_reap import reap_stale
from support.node_stage import Release, install_release

T = TypeVar("T")
#: Budgets of the session's set-up (outside any test's timeout).
IMAGES_BUDGET_S = 1800.0
NODE_BUDGET_S = 300.0


class NodeTier:
    """The session's node tier: built and started at most once, each piece on first need."""

    def __init__(self) -> None:
        self.workdir = Path(tempfile.mkdtemp(prefix="berth-node-"))
        self.build: subprocess.Popen[bytes] | None = None
        self.manifest = self.workdir / "images.json"
        self.cluster: Cluster | None = None
        self.kube: Kube | None = None
        self.release: Release | None = None
        self.ha_stage: HaStage | None = None
        self._failures: dict[str, BaseException] = {}

    def missing(self) -> str | None:
        pieces = missing_pieces(find_binaries()) + missing_build_tools()
        for tool in ("kubectl", "helm"):
            if find_tool(tool) is None:
                pieces.append(f"{tool} (make tools)")
        return f"{HOW_TO_GET}; missing: {', '.join(pieces)}" if pieces else None

    def start_build(self) -> None:
        if self.build is None and self.missing() is None:
            log = open(self.workdir / "images-build.out", "wb")  # noqa: SIM115 - the build writes it
            env = {**os.environ, "PYTHONPATH": str(REPO / "tests")}
            argv = [sys.executable, "-m", "support.node_images", str(self.manifest)]
            self.build = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)

    def once(self, what: str, make: Callable[[], T]) -> T:
        """``make()`` the first time; its failure again on every later call (no second attempt in one session)."""
        if what in self._failures:
            raise self._failures[what]
        try:
            return make()
        except BaseException as error:
            self._failures[what] = error
            raise

    def images(self) -> dict[str, dict[str, Any]]:
        return self.once("images", self._images)

    def _images(self) -> dict[str, dict[str, Any]]:
        self.start_build()
        assert self.build is not None
        try:
            self.build.wait(timeout=IMAGES_BUDGET_S)
        except subprocess.TimeoutExpired:
            self.build.kill()
            raise RuntimeError(f"the images were not built within {IMAGES_BUDGET_S:g} s") from None
        result = json.loads(self.manifest.read_text()) if self.manifest.exists() else {}
        if "images" not in result:
            log = self.manifest.with_suffix(".log")
            tail = log.read_text(errors="replace")[-4000:] if log.exists() else ""
            raise RuntimeError(f"building the node's images failed: {result.get('error')}\n{tail}")
        images: dict[str, dict[str, Any]] = result["images"]
        return images

    def started_cluster(self) -> Cluster:
        return self.once("node", self._cluster)

    def _cluster(self) -> Cluster:
        if self.cluster is not None:
            return self.cluster
        images = self.images()
        binaries = find_binaries()
        assert binaries is not None
        archives = [Path(images["pause"]["archive"])]
        archives += [Path(image["archive"]) for name, image in images.items() if name != "pause"]
        cluster = Cluster(binaries, self.workdir / "k8s", reap_also=(self.workdir,))
        self.cluster = cluster  # stopped at session end even when start() fails half-way
        cluster.start(archives, nodes=1, timeout_s=NODE_BUDGET_S)
        return cluster

    def started_node(self) -> Node:
        return self.started_cluster().nodes[0]

    def three(self) -> Cluster:
        return self.once("three", self._three)

    def _three(self) -> Cluster:
        cluster = self.started_cluster()
        cluster.grow(3)
        return cluster

    def admin(self) -> Kube:
        return self.once("kube", self._admin)

    def _admin(self) -> Kube:
        if self.kube is not None:
            return self.kube
        cluster = self.started_cluster()
        kubectl, helm = find_tool("kubectl"), find_tool("helm")
        assert kubectl is not None and helm is not None and cluster.plane is not None
        kube = Kube(kubectl, helm, cluster.kubeconfig, cluster.server, cluster.plane.pki / "ca.crt", self.workdir)
        kube.kubectl("apply", "--server-side", "-f", str(CRD_DIR))
        kube.wait_established(CRD_NAME)
        self.kube = kube
        return kube

    def installed(self) -> Release:
        return self.once("release", self._installed)

    def _installed(self) -> Release:
        if self.release is None:
            self.release = install_release(self.admin(), REPO / "charts" / "berth")
        return self.release

    def ha(self) -> HaStage:
        return self.once("ha", self._ha)

    def _ha(self) -> HaStage:
        if self.ha_stage is None:
            release, cluster = self.installed(), self.started_cluster()
            self.ha_stage = moved_to_ha(release, cluster)
        return self.ha_stage

    def stop(self) -> None:
        if self.build is not None and self.build.poll() is None:
            self.build.terminate()
            self.build.wait()
        if self.cluster is not None:
            self.cluster.stop()
        shutil.rmtree(self.workdir, ignore_errors=True)


_tier: NodeTier | None = None


def tier() -> NodeTier:
    global _tier
    if _tier is None:
        _tier = NodeTier()
    return _tier


def _checked() -> NodeTier:
    found = tier()
    missing = found.missing()
    if missing:
        unavailable(missing)
    return found


def pytest_collection_finish(session: pytest.Session) -> None:
    """Once the session is known to run a node test (after -m/-k deselection): end the nodes of runs that died
    without stopping theirs (``support.node_reap``; never a live run's), then start building the images."""
    if any(item.get_closest_marker("node") for item in session.items) and tier().missing() is None:
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        for netns in reap_stale():
            if reporter is not None:
                reporter.write_line(f"node tier: reaped {netns}, left behind by a run that is gone")
        tier().start_build()


def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    """The tests on ``three_nodes`` after the one-node tests (a node test that does not ask for three may count on
    one: its pods, its node's address), and the tests on ``ha_stage`` last: moving the session's release to
    coordinator.ha is one-way, and the other node tests expect the single replica. Tests marked ``soak`` (long
    scenarios) are selected only with ``BERTH_SOAK=1`` (make soak)."""

    def phase(item: pytest.Item) -> tuple[bool, bool]:
        names = getattr(item, "fixturenames", ())
        return "ha_stage" in names, "three_nodes" in names

    items.sort(key=phase)  # stable: the order within each phase is kept
    if not os.environ.get("BERTH_SOAK"):  # not selected (never a skip: make soak runs them, make test does not)
        soak = [item for item in items if item.get_closest_marker("soak")]
        if soak:
            config.hook.pytest_deselected(items=soak)
            items[:] = [item for item in items if not item.get_closest_marker("soak")]


#: What a node test's fixtures need made before its timer starts, by fixture name, in the order they are made.
_PREPARE = {
    "node_images": "images",
    "cluster": "started_cluster",
    "node": "started_node",
    "node_kube": "admin",
    "berth_release": "installed",
    "three_nodes": "three",
    "ha_stage": "ha",
}


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    """Set the session's node tier up outside the test's timeout (pytest-timeout starts its timer inside this)."""
    names = getattr(item, "fixturenames", ())
    skipped = item.get_closest_marker("skip") is not None
    wanted = [] if skipped else [method for fixture, method in _PREPARE.items() if fixture in names]
    if wanted and tier().missing() is None:
        started = time.monotonic()
        for method in wanted:
            with contextlib.suppress(Exception):  # the fixture raises it again, inside the test, as its error
                getattr(tier(), method)()
        elapsed = time.monotonic() - started
        if elapsed > 1:
            item.user_properties.append(("node-tier set-up (s)", round(elapsed, 1)))
    yield


def pytest_sessionfinish(session: pytest.Session) -> None:
    if _tier is not None:
        _tier.stop()


@pytest.fixture(scope="session")
def node_images() -> dict[str, dict[str, Any]]:
    return _checked().images()


@pytest.fixture(scope="session")
def node() -> Node:
    return _checked().started_node()


@pytest.fixture(scope="session")
def cluster() -> Cluster:
    return _checked().started_cluster()


@pytest.fixture(scope="session")
def three_nodes() -> Cluster:
    return _checked().three()


@pytest.fixture(scope="session")
def node_kube() -> Kube:
    return _checked().admin()


@pytest.fixture(scope="session")
def berth_release() -> Release:
    return _checked().installed()


@pytest.fixture(scope="session")
def ha_stage() -> HaStage:
    return _checked().ha()
