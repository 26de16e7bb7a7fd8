"""``berth-demo`` and the pipeline's report agree: on the rebalances of each group, and on the heartbeat interval.

The demo runs whole, as ``make demo`` does (a real coordinator, member processes, the operator's loop, then
``berth-analyze`` as a subprocess on the journal it wrote); its table and the report's files are then read back.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

pytestmark = [pytest.mark.spark, pytest.mark.slow, pytest.mark.timeout(600)]

TABLE_ROW = re.compile(r"^(form|rolling_restart|scale_down|scale_up)\s+(static|dynamic)\s+(\d+)\s+(\d+)\s+[\d.]+ s$")
GROUP_OF = {"static": "orders", "dynamic": "orders-dynamic"}


def test_the_report_counts_the_rebalances_of_the_demos_table_and_advises_with_the_demos_heartbeat(
    tmp_path: Path,
) -> None:
    data_dir = tmp_path / "coordinator"
    command = [sys.executable, "-m", "berth.operator.local.demo", "--data-dir", str(data_dir)]
    command += ["--members", "3", "--scale-by", "1", "--partitions", "6", "--heartbeat-interval-ms", "400"]
    result = subprocess.run(command, capture_output=True, text=True, timeout=540, check=False)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]

    table: dict[str, int] = {}
    for line in result.stdout.splitlines():
        if match := TABLE_ROW.match(line.strip()):
            group = GROUP_OF[match.group(2)]
            table[group] = table.get(group, 0) + int(match.group(3))
    analysis = tmp_path / "analysis"
    summary = {row["group_id"]: row for row in pq.read_table(analysis / "summary.parquet").to_pylist()}
    advice = json.loads((analysis / "advice.json").read_text())

    # Every rebalance in the journal is in the table, the fleets forming included, and the demo's teardown is not
    # in the journal: the static members' sessions never expire in it, the dynamic members never leave in it.
    assert {group: row["rebalances"] for group, row in summary.items()} == table
    assert summary["orders"]["rebalances_by_cause"] == [("member_left", 1), ("new_member", 2)]
    assert summary["orders"]["static_restarts"] == 3
    assert summary["orders"]["restarts_without_rebalance"] == 3
    # The advice adds the heartbeat the members ran with (400 ms here), not the pipeline's 3 s default.
    orders = advice["groups"]["orders"]
    assert orders["heartbeat_interval_ms"] == 400
    assert " + 0.4 s heartbeat = " in orders["reason"]
    assert "heartbeat every 400 ms" in result.stdout
