"""Fixtures for tests/chart: the real helm and kubectl binaries, or a clear skip when they are not installed (a
failure under CI=true: ``support.ci``)."""

from __future__ import annotations

import pytest
from chart_helpers import find_tool
from support.ci import unavailable


@pytest.fixture(scope="session")
def helm_bin() -> str:
    path = find_tool("helm")
    if path is None:
        unavailable("helm is not installed in .tools/bin or on PATH: run `make tools` (scripts/install_k8s_tools.py)")
    return path


@pytest.fixture(scope="session")
def kubectl_bin() -> str:
    path = find_tool("kubectl")
    if path is None:
        unavailable(
            "kubectl is not installed in .tools/bin or on PATH: run `make tools` (scripts/install_k8s_tools.py)"
        )
    return path
