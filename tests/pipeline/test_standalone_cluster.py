"""``berth-analyze`` on a real Spark standalone cluster: a master and two workers started from the pyspark
installation on 127.0.0.1, their executors in other processes than the driver, as on a cluster.

The workers run in their own mount namespace (``unshare``) where one folder, ``driver-only``, is an empty tmpfs:
a journal there is on the driver's disk only, as a driver-local path is on a real cluster. Scenarios:
- berth-demo's journal (tests/pipeline/data) analysed on the cluster gives the same advice and summary as the
  local session, the job's cores counted from the cluster's executors (two) and its shuffle partitions sized from
  the journal (one for a demo's journal, not Spark's 200);
- a journal the executors cannot see is one line on stderr and exit 1, not a failed stage's traceback;
- ``convert --out`` in a folder the executors cannot see is refused the same way.
The cluster is shared by the module's tests and stopped by PID at the end.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pyarrow.parquet as pq
import pyspark
import pytest
from pyspark.sql import SparkSession
from support.ci import unavailable
from support.net import free_ports

from berth.pipeline.main import main

pytestmark = [pytest.mark.spark, pytest.mark.slow]

DEMO_JOURNAL = Path(__file__).parent / "data" / "demo-journal"
WORKERS = 2
# Small, fast JVMs: the defaults size heaps for real machines and spend seconds in the JIT.
FAST_JVM = "-XX:+UseSerialGC -XX:TieredStopAtLevel=1"


@dataclass
class Cluster:
    master_url: str
    driver_only: Path  # a folder the driver sees and the executors see empty
    environment: dict[str, str]

    def analyze(self, *args: str) -> subprocess.CompletedProcess[str]:
        """A fresh ``berth-analyze`` process (a driver of its own) with this cluster as its master."""
        command = [sys.executable, "-m", "berth.pipeline.main", *args, "--master", self.master_url]
        return subprocess.run(command, env=self.environment, capture_output=True, text=True, timeout=240, check=False)


def workers_alive(web_port: int) -> int:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{web_port}/json/", timeout=2) as response:
            state = json.load(response)
    except OSError:
        return 0
    return sum(1 for w in state.get("workers", []) if w.get("state") == "ALIVE")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    if shutil.which("unshare") is None:
        unavailable("unshare (util-linux) is needed to give the workers a view of the disk the driver lacks")
    base = tmp_path_factory.mktemp("standalone")
    driver_only = base / "driver-only"
    driver_only.mkdir()
    spark_home = Path(pyspark.__file__).parent
    spark_class = str(spark_home / "bin" / "spark-class")
    environment = {
        **os.environ,
        "SPARK_HOME": str(spark_home),
        "SPARK_LOCAL_IP": "127.0.0.1",
        "PYSPARK_PYTHON": sys.executable,
        "SPARK_DAEMON_MEMORY": "256m",
        "SPARK_DAEMON_JAVA_OPTS": FAST_JVM,
        "SPARK_LOG_DIR": str(base / "logs"),
        # The drivers berth-analyze starts: executors as small and quick to start as the daemons.
        "PYSPARK_SUBMIT_ARGS": f'--conf spark.executor.memory=512m --conf "spark.executor.extraJavaOptions={FAST_JVM}" '
        f'--driver-java-options "{FAST_JVM}" pyspark-shell',
    }
    port, web_port = free_ports(2)
    master_url = f"spark://127.0.0.1:{port}"
    processes: list[subprocess.Popen[bytes]] = []
    logs = base / "daemon-logs"
    logs.mkdir()
    try:
        master = [spark_class, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1"]
        processes.append(_start([*master, "--port", str(port), "--webui-port", str(web_port)], environment, logs))
        for n in range(WORKERS):
            worker = [spark_class, "org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1", "--cores", "1"]
            worker += ["--memory", "1g", "--work-dir", str(base / f"work-{n}"), "--webui-port", "0", master_url]
            # A mount namespace of their own, in which driver-only is an empty tmpfs (exec: the PID stays theirs).
            hidden = f'mount -t tmpfs berth-test {driver_only} && exec "$@"'
            isolated = ["unshare", "--user", "--map-root-user", "--mount", "sh", "-c", hidden, "sh", *worker]
            processes.append(_start(isolated, environment, logs))
        deadline = time.monotonic() + 90
        while workers_alive(web_port) < WORKERS:
            if time.monotonic() > deadline or any(p.poll() is not None for p in processes):
                pytest.fail(f"the standalone cluster did not come up; logs in {logs}")
            time.sleep(0.3)
        yield Cluster(master_url, driver_only, environment)
    finally:
        for process in reversed(processes):
            process.terminate()
        for process in processes:
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def _start(command: list[str], environment: dict[str, str], logs: Path) -> subprocess.Popen[bytes]:
    log = logs / f"{len(list(logs.iterdir()))}.log"
    with log.open("wb") as out:
        return subprocess.Popen(command, env=environment, stdout=out, stderr=subprocess.STDOUT)


def advice_and_summary(out: Path) -> tuple[dict[str, object], list[dict[str, object]]]:
    advice = json.loads((out / "advice.json").read_text())
    advice.pop("generated_at_ms")
    return advice, pq.read_table(out / "summary.parquet").to_pylist()


def test_the_cluster_gives_the_same_advice_and_summary_as_local_mode(
    spark: SparkSession, cluster: Cluster, tmp_path: Path
) -> None:
    local_out, cluster_out = tmp_path / "local", tmp_path / "cluster"

    assert main(["--journal", str(DEMO_JOURNAL), "--out", str(local_out), "--no-report", "--quiet"]) == 0
    started = time.monotonic()
    result = cluster.analyze("--journal", str(DEMO_JOURNAL), "--out", str(cluster_out), "--no-report")
    elapsed = time.monotonic() - started

    assert result.returncode == 0, result.stderr[-3000:]
    assert advice_and_summary(cluster_out) == advice_and_summary(local_out)
    advice, summary = advice_and_summary(cluster_out)
    assert advice["groups"]["orders"]["restart_gap_p_ms"] == 662  # type: ignore[index]
    by_group = {row["group_id"]: row for row in summary}
    # What berth-demo's table said for the run that wrote this journal: 8 + 8 partitions moved by the scalings,
    # none by either rolling restart; six dynamic restarts, one rebalance each; so six rebalances avoided.
    assert [by_group["orders"][k] for k in ("partitions_moved", "rebalances_avoided")] == [16, 6]
    assert [by_group["orders-dynamic"][k] for k in ("partitions_moved", "dynamic_restart_rebalances")] == [0, 6]
    # The cores are the executors' (two), and a demo's journal is one shuffle partition (not Spark's 200), with
    # neither adaptive execution nor whole-stage code generation (sizing's rules for a small journal).
    assert f"Spark master {cluster.master_url} (2 cores, driver heap " in result.stderr
    assert "), 1 shuffle partition, no adaptive execution or codegen\n" in result.stderr
    print(f"standalone cluster run: {elapsed:.1f} s")


@pytest.mark.soak  # make soak: a standalone cluster's error paths (its main comparison is make test's)
def test_a_journal_only_the_driver_can_read_is_one_line_and_exit_1(cluster: Cluster, tmp_path: Path) -> None:
    journal = cluster.driver_only / "journal"
    shutil.copytree(DEMO_JOURNAL, journal)

    result = cluster.analyze("--journal", str(journal), "--out", str(tmp_path / "out"), "--quiet")

    assert result.returncode == 1
    errors = [line for line in result.stderr.splitlines() if line.startswith("berth-analyze: error:")]
    assert errors == [
        f"berth-analyze: error: journal {journal} is not readable where Spark's executors run "
        f"({socket.gethostname()}: {journal} not found); put it on storage every executor reads: a shared volume, "
        "HDFS or an object store (docs/pipeline.md, 'On a cluster')"
    ]
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "out").exists()


@pytest.mark.soak
def test_convert_refuses_an_out_the_executors_cannot_share_with_the_driver(cluster: Cluster, tmp_path: Path) -> None:
    out = cluster.driver_only / "parquet"

    command = [sys.executable, "-m", "berth.pipeline.main", "convert", "--journal", str(DEMO_JOURNAL)]
    command += ["--out", str(out), "--master", cluster.master_url, "--quiet"]
    result = subprocess.run(command, env=cluster.environment, capture_output=True, text=True, timeout=240, check=False)

    assert result.returncode == 1
    errors = [line for line in result.stderr.splitlines() if line.startswith("berth-analyze: error:")]
    assert len(errors) == 1, result.stderr[-3000:]
    assert errors[0].startswith(f"berth-analyze: error: --out {out} is not storage the executors and the driver share")
    assert "Traceback" not in result.stderr
    assert not out.exists()
