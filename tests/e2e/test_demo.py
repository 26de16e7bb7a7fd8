"""``berth-demo`` end to end, shortened: a real coordinator, real member processes, the operator's own planner
and driver scaling them (issue 3's local fleet; issue 4's end-to-end test of the planners with the local fleet).

Rebalance counts are exact for static membership: a rolling restart costs none, a scale-down one (one batch
leave), a scale-up with pre-registration one.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

pytestmark = [pytest.mark.timeout(240), pytest.mark.slow]


def test_the_demo_table_shows_static_membership_at_work() -> None:
    temporary = Path(tempfile.gettempdir())
    before = set(temporary.glob("berth-demo-*"))
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "berth.operator.local.demo",
            "--json",
            "--no-report",
            "--members",
            "4",
            "--scale-by",
            "2",
            "--partitions",
            "8",
        ],
        capture_output=True,
        text=True,
        timeout=200,
    )
    assert result.returncode == 0, result.stderr
    assert set(temporary.glob("berth-demo-*")) == before, "berth-demo --json left its temporary directory behind"
    rows = json.loads(result.stdout)
    table = {(r["scenario"], r["membership"]): r for r in rows}
    assert set(table) == {
        ("form", "static"),
        ("form", "dynamic"),
        ("rolling_restart", "static"),
        ("scale_down", "static"),
        ("scale_up", "static"),
        ("rolling_restart", "dynamic"),
    }
    assert table["rolling_restart", "static"]["rebalances"] == 0
    assert table["rolling_restart", "static"]["partitions_moved"] == 0
    assert table["scale_down", "static"]["rebalances"] == 1
    assert table["scale_up", "static"]["rebalances"] == 1
    assert table["form", "static"]["rebalances"] == 1  # pre-registered: every member in one rebalance
    assert table["form", "static"]["partitions_moved"] == 0
    # 4 -> 2 members over 8 partitions: the two leavers' 4 partitions move, and come back on the way up.
    assert table["scale_down", "static"]["partitions_moved"] == 4
    assert table["scale_up", "static"]["partitions_moved"] == 4
    assert table["rolling_restart", "dynamic"]["rebalances"] >= 4  # at least one per restarted dynamic member
    for row in rows:
        assert set(row) == {
            "scenario",
            "membership",
            "group_id",
            "rebalances",
            "partitions_moved",
            "seconds_to_reassignment",
        }
        assert row["group_id"] == ("orders" if row["membership"] == "static" else "orders-dynamic")
        assert row["seconds_to_reassignment"] >= 0
