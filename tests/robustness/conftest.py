"""What the robustness runs need from the machine: root, the network and disk tools, etcd (``make install``)."""

from __future__ import annotations

import pytest
from support.kube_fixtures import unavailable
from support.loopdisk import missing_tools as missing_disk_tools
from support.netlab import missing_tools as missing_network_tools

from berth.operator.local.etcd_cluster import etcd_binary


@pytest.fixture
def lab_ready() -> None:
    """Skip (fail under CI=true) where the runs cannot be made."""
    missing = missing_network_tools() + missing_disk_tools() + ([] if etcd_binary() else ["etcd"])
    if missing:
        unavailable(f"the robustness runs need {', '.join(sorted(set(missing)))} (make install)")
