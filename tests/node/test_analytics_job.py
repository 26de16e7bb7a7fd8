"""The analytics CronJob on the real node: its Job (the analytics image, Spark in the pod) reads the coordinator's
journal and publishes advice, and the operator reads that advice for the fleet."""

from __future__ import annotations

import json

import pytest
from support.kube import wait_until
from support.node_stage import CHART, FleetStage

pytestmark = [pytest.mark.node, pytest.mark.timeout(1200)]


def test_the_analytics_job_completes_on_the_journal_and_the_operator_reads_its_advice(stage: FleetStage) -> None:
    release, kube = stage.release, stage.release.kube
    stage.apply_example(2)
    stage.ready_and_stable(2)
    # A restart for the journal to measure: the gap between the pod's leaving and its rejoining.
    stage.kubectl("delete", "pod", f"{stage.name}-1")
    stage.ready_and_stable(2)

    kube.helm(
        "upgrade", "berth", str(CHART), "-n", "berth", "--reuse-values", "--set", "analytics.enabled=true",
    )  # fmt: skip
    release.rollout()
    kube.kubectl("-n", "berth", "create", "job", "analytics-now", "--from=cronjob/berth-analytics")
    wait_until(
        lambda: (
            (job := kube.get("job", "analytics-now", namespace="berth"))
            and any(
                c["type"] in ("Complete", "Failed") and c["status"] == "True"
                for c in job["status"].get("conditions") or []
            )
        ),
        "the analytics Job finished",
        timeout_s=900,
        every_s=2,
    )
    job = kube.get("job", "analytics-now", namespace="berth")
    logs = kube.kubectl("-n", "berth", "logs", "job/analytics-now", check=False).stdout
    assert job["status"].get("succeeded") == 1, logs[-3000:]
    (pod,) = kube.get("pods", namespace="berth", selector="job-name=analytics-now")["items"]
    assert pod["status"]["containerStatuses"][0]["image"] == "docker.io/library/berth-analytics:0.1.0"

    advice = json.loads(kube.get("configmap", "berth-advice", namespace="berth")["data"]["advice.json"])
    assert stage.name in advice["groups"], advice
    # The operator reads it: the fleet's sizing names the advice (not confident on one sample, so not used).
    wait_until(
        lambda: "journal advice" in (stage.status().get("sessionTimeoutReason") or ""),
        "the operator reading the advice",
        timeout_s=180,
    )
