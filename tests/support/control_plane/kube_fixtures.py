"""Pytest fixtures for the real control-plane tier (loaded from the root conftest as a plugin).

- ``control_plane`` (session): etcd, kube-apiserver and kube-controller-manager, started once on first use and
  stopped by PID at the end of the run. Tests that never ask for it never start it.
- ``kube`` (session): ``kubectl``/``helm`` as the cluster admin, with the ConsumerFleet CRD applied and Established.
- ``namespace``: a fresh namespace per test.

Without the binaries the tier is skipped with one line saying how to get them; with ``CI=true`` that skip is a
failure instead, so CI always exercises the tier.
"""

from __future__ import annotations

import itertools
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from support.ci import unavailable
from support.kube import Kube, find_tool, wait_until
from support.kube_cluster import HOW_TO_GET, REPO, ControlPlane, find_binaries

CRD_DIR = REPO / "deploy" / "crds"
CRD_NAME = "consumerfleets.berth.dev"


@contextmanager
def started_control_plane(controller_flags: tuple[str, ...] = ()) -> Iterator[ControlPlane]:
    """A control plane of its own (``controller_flags``: more kube-controller-manager flags), stopped and removed on
    exit (or a skip naming what is missing)."""
    binaries = find_binaries()
    if binaries is None:
        unavailable(HOW_TO_GET)
    assert binaries is not None
    if shutil.which("openssl") is None:
        unavailable("the control-plane tier makes its PKI with openssl, which is not on PATH")
    workdir = Path(tempfile.mkdtemp(prefix="berth-k8s-"))
    plane = ControlPlane(binaries, workdir, controller_flags=controller_flags)
    try:
        plane.start()
        yield plane
    finally:
        plane.stop()
        shutil.rmtree(workdir, ignore_errors=True)


def admin_of(plane: ControlPlane) -> Kube:
    """kubectl and helm as the control plane's admin."""
    kubectl, helm = find_tool("kubectl"), find_tool("helm")
    if kubectl is None or helm is None:
        unavailable("helm and kubectl are not in .tools/bin or on PATH: run `make tools`")
    assert kubectl is not None and helm is not None
    return Kube(kubectl, helm, plane.kubeconfig, plane.server, plane.pki / "ca.crt", plane.workdir)


@pytest.fixture(scope="session")
def control_plane() -> Iterator[ControlPlane]:
    with started_control_plane() as plane:
        yield plane


@pytest.fixture(scope="session")
def kube(control_plane: ControlPlane) -> Kube:
    admin = admin_of(control_plane)
    admin.kubectl("apply", "--server-side", "-f", str(CRD_DIR))
    admin.wait_established(CRD_NAME)
    # The controller-manager makes each namespace's default ServiceAccount; wait for it once.
    wait_until(lambda: admin.get("serviceaccount", "default", namespace="default"), "the default ServiceAccount")
    return admin


_namespaces = itertools.count(1)


@pytest.fixture
def namespace(kube: Kube, request: pytest.FixtureRequest) -> str:
    """A fresh namespace for one test, named after it (left in place: the control plane goes at session end)."""
    stem = "".join(c if c.isalnum() else "-" for c in request.node.name.lower())[:40].strip("-")
    return kube.create_namespace(f"t{next(_namespaces)}-{stem}".rstrip("-"))
