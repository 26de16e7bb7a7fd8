"""The analytics job on Spark on Kubernetes, the way docs/pipeline.md says: ``spark-submit --master k8s://...
--deploy-mode cluster`` with ``deploy/spark/pod-template.yaml``, ``deploy/spark/rbac.yaml`` and
``deploy/spark/volumes.yaml`` applied as they are, from this repository's virtualenv, against the node tier's API
server: a driver pod and two executor pods from the analytics image, the executors on different nodes (the pod
template's spread), reading berth-demo's journal (tests/pipeline/data) from the ``berth-journal`` claim.

The node tier's stand-in for a ReadWriteMany volume: a ``hostPath`` PersistentVolume (ReadWriteMany) on a directory
of this machine, which every node mounts, since every node is this machine; the outputs go to ``berth-analytics``
(ReadWriteOnce, the same way). Only the resources are smaller than the page's (a 2-core machine): driver 1 core and
1g, executors 1 core and 512m each.

Asserted: the job succeeds; its ``advice.json`` and ``summary.parquet`` equal local mode's on the same journal, group
by group. Printed (``-s``): the job's wall time from ``spark-submit`` to its exit, local mode's, and the pods'
placement and requests."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import yaml
from support.kube import Kube
from support.node import Cluster
from support.node_stage import Release

pytestmark = [pytest.mark.soak, pytest.mark.node, pytest.mark.spark, pytest.mark.timeout(1200)]

REPO = Path(__file__).resolve().parents[2]
SPARK = REPO / "deploy" / "spark"
DEMO_JOURNAL = REPO / "tests" / "pipeline" / "data" / "demo-journal"
JOB = "local:///opt/berth/lib/python3.11/site-packages/berth/pipeline/main.py"
APP = "berth-analyze-nodes"


def host_path_volume(name: str, path: Path, access: str, size: str, claim: str) -> dict[str, object]:
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": name},
        "spec": {
            "capacity": {"storage": size},
            "accessModes": [access],
            "persistentVolumeReclaimPolicy": "Retain",
            "storageClassName": "",
            "claimRef": {"namespace": "berth", "name": claim},
            "hostPath": {"path": str(path), "type": "Directory"},
        },
    }


def advice_and_summary(out: Path) -> tuple[dict[str, object], dict[str, dict[str, object]]]:
    advice = json.loads((out / "advice.json").read_text())
    advice.pop("generated_at_ms")
    rows = pq.read_table(out / "summary.parquet").to_pylist()
    return advice, {str(row["group_id"]): row for row in rows}


def test_spark_submit_in_cluster_mode_runs_executors_on_two_nodes_and_equals_local_mode(
    three_nodes: Cluster, berth_release: Release, tmp_path: Path
) -> None:
    kube: Kube = berth_release.kube
    assert three_nodes.plane is not None
    volumes = three_nodes.workdir / "volumes"
    journal, outputs = volumes / "spark-journal", volumes / "spark-analytics"
    shutil.copytree(DEMO_JOURNAL, journal)
    outputs.mkdir()
    for path in (journal, outputs, *journal.iterdir()):
        path.chmod(0o777 if path.is_dir() else 0o644)
    kube.apply(
        host_path_volume("spark-journal", journal, "ReadWriteMany", "20Gi", "berth-journal"),
        host_path_volume("spark-analytics", outputs, "ReadWriteOnce", "1Gi", "berth-analytics"),
    )
    # The page's prerequisites, as they are.
    kube.kubectl("apply", "-f", str(SPARK / "rbac.yaml"), "-f", str(SPARK / "volumes.yaml"))

    local_out = tmp_path / "local"
    started = time.monotonic()
    local = subprocess.run(
        [sys.executable, "-m", "berth.pipeline.main", "--journal", str(DEMO_JOURNAL), "--out", str(local_out),
         "--no-report", "--quiet"],
        capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    local_s = time.monotonic() - started
    assert local.returncode == 0, local.stderr[-3000:]

    pki = three_nodes.plane.pki
    conf = {
        "spark.kubernetes.namespace": "berth",
        "spark.kubernetes.container.image": "berth-analytics:0.1.0",
        "spark.kubernetes.container.image.pullPolicy": "Never",  # built here and imported into every node
        "spark.kubernetes.authenticate.driver.serviceAccountName": "berth-analytics",
        "spark.kubernetes.authenticate.submission.caCertFile": str(pki / "ca.crt"),
        "spark.kubernetes.authenticate.submission.clientCertFile": str(pki / "admin.crt"),
        "spark.kubernetes.authenticate.submission.clientKeyFile": str(pki / "admin.key"),
        "spark.kubernetes.driver.podTemplateFile": str(SPARK / "pod-template.yaml"),
        "spark.kubernetes.executor.podTemplateFile": str(SPARK / "pod-template.yaml"),
        "spark.driver.cores": "1",
        "spark.driver.memory": "1g",
        "spark.executor.instances": "2",
        "spark.executor.cores": "1",
        "spark.executor.memory": "512m",
        "spark.kubernetes.executor.request.cores": "500m",
        "spark.kubernetes.executor.deleteOnTermination": "false",  # kept to see where they ran
        "spark.pyspark.python": "/opt/berth/bin/python",
        "spark.pyspark.driver.python": "/opt/berth/bin/python",
    }
    for role in ("driver", "executor"):
        prefix = f"spark.kubernetes.{role}.volumes.persistentVolumeClaim.journal"
        conf |= {f"{prefix}.options.claimName": "berth-journal", f"{prefix}.mount.path": "/data/journal",
                 f"{prefix}.mount.readOnly": "true"}  # fmt: skip
    prefix = "spark.kubernetes.driver.volumes.persistentVolumeClaim.analytics"
    conf |= {f"{prefix}.options.claimName": "berth-analytics", f"{prefix}.mount.path": "/data/analytics"}
    argv = ["spark-submit", "--master", f"k8s://{three_nodes.server}", "--deploy-mode", "cluster", "--name", APP]
    for key, value in conf.items():
        argv += ["--conf", f"{key}={value}"]
    argv += [JOB, "--journal", "/data/journal", "--out", "/data/analytics", "--no-report"]
    environment = {**os.environ, "PATH": f"{REPO / '.venv' / 'bin'}:{os.environ['PATH']}"}
    started = time.monotonic()
    submitted = subprocess.run(argv, env=environment, capture_output=True, text=True, timeout=900, check=False)
    cluster_s = time.monotonic() - started
    pods = kube.get("pods", namespace="berth", selector="spark-role")["items"]
    driver = next(p for p in pods if p["metadata"]["labels"]["spark-role"] == "driver")
    driver_log = kube.kubectl("-n", "berth", "logs", driver["metadata"]["name"], check=False).stdout
    assert submitted.returncode == 0, (submitted.stderr[-3000:], driver_log[-3000:])
    assert driver["status"]["phase"] == "Succeeded", driver_log[-3000:]
    executors = [p for p in pods if p["metadata"]["labels"]["spark-role"] == "executor"]
    placement = {p["metadata"]["name"]: p["spec"]["nodeName"] for p in [driver, *executors]}
    images = {c["image"] for p in [driver, *executors] for c in p["spec"]["containers"]}
    requests = {p["metadata"]["name"]: p["spec"]["containers"][0]["resources"] for p in [driver, *executors]}
    print(
        f"\nSpark on Kubernetes (cluster mode, 2 executors): {cluster_s:.1f} s from spark-submit to its exit;"
        f" local mode on the same journal: {local_s:.1f} s\npods: {placement}\nimages: {images}\n"
        f"requests:\n{yaml.safe_dump(requests)}"
    )
    assert len(executors) == 2 and len({p["spec"]["nodeName"] for p in executors}) == 2, placement
    assert images == {"berth-analytics:0.1.0"}
    local_advice, local_summary = advice_and_summary(local_out)
    advice, summary = advice_and_summary(outputs)
    assert summary.keys() == local_summary.keys()
    for group, row in local_summary.items():
        assert summary[group] == row, group
    assert advice == local_advice
    kube.kubectl("-n", "berth", "delete", "pods", "-l", "spark-role", "--wait=false", check=False)
