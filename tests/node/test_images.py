"""The images themselves, run by the node's kubelet as pods (they replace the venv imitation the suite ran before
any container could): each holds what its processes run and nothing more, and each program does its real work.

- ``berth:0.1.0`` (the Dockerfile's runtime target): no Spark, Java-bound or plotting package; ``berth-operator``
  and ``berth-groups`` answer; ``berth-analyze`` says in one line that it needs the pipeline extra. (Its
  coordinator, operator and ``berth-groups list`` run in test_install.py, as the chart runs them.)
- ``berth-analytics:0.1.0`` (the analytics target): ``berth-analyze`` analyses berth-demo's journal (mounted from
  a ConfigMap), report included (matplotlib), in local Spark inside the pod, to the known figure, its JVM mapping
  the class-data archive the image's build wrote. (The chart's
  CronJob runs it on the coordinator's own journal in test_analytics_job.py.)
- ``berth-examples:0.1.0`` (deploy/examples/consumers/Dockerfile): both example consumers import their clients.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.kube import Kube, wait_until

pytestmark = [pytest.mark.node, pytest.mark.timeout(900)]

REPO = Path(__file__).resolve().parents[2]
DEMO_JOURNAL = REPO / "tests" / "pipeline" / "data" / "demo-journal"
NOT_IN_RUNTIME = ("pyspark", "py4j", "pyarrow", "pandas", "matplotlib", "numpy")


@pytest.fixture(scope="module")
def namespace(node_kube: Kube) -> Iterator[str]:
    name = node_kube.create_namespace("images")
    node_kube.kubectl("-n", name, "create", "configmap", "demo-journal", f"--from-file={DEMO_JOURNAL}")
    yield name
    node_kube.kubectl("delete", "namespace", name, "--wait=false", check=False)


def run_pod(kube: Kube, namespace: str, name: str, image: str, script: str, **volumes: Any) -> tuple[str, str]:
    """A pod running ``sh -c script`` once, as the image's own user on a read-only root; (its phase, its log)."""
    mounts = [{"name": "tmp", "mountPath": "/tmp"}] + [{"name": v, "mountPath": f"/{v}"} for v in volumes]
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "restartPolicy": "Never",
            "automountServiceAccountToken": False,
            "securityContext": {"runAsNonRoot": True},
            "containers": [
                {
                    "name": "main",
                    "image": image,
                    "imagePullPolicy": "IfNotPresent",
                    "args": ["sh", "-c", script],
                    "env": [{"name": "HOME", "value": "/tmp"}, {"name": "SPARK_LOCAL_IP", "value": "127.0.0.1"}],
                    "securityContext": {"readOnlyRootFilesystem": True, "allowPrivilegeEscalation": False},
                    "volumeMounts": mounts,
                }
            ],
            "volumes": [{"name": "tmp", "emptyDir": {}}] + [{"name": k, **v} for k, v in volumes.items()],
        },
    }
    kube.apply(pod, namespace=namespace)
    phase = wait_until(
        lambda: (
            (kube.get("pod", name, namespace=namespace) or {}).get("status", {}).get("phase") in ("Succeeded", "Failed")
            and kube.get("pod", name, namespace=namespace)["status"]["phase"]
        ),
        f"pod {name} finished",
        timeout_s=600,
        every_s=1,
    )
    return phase, kube.kubectl("-n", namespace, "logs", name).stdout


def test_the_runtime_image_has_no_spark_and_its_programs_answer(node_kube: Kube, namespace: str) -> None:
    modules = " ".join(NOT_IN_RUNTIME)
    probe = "import importlib.util, sys; print('present:', [m for m in sys.argv[1:] if importlib.util.find_spec(m)])"
    script = f"""
python -c "{probe}" {modules}
berth-operator --help > /dev/null && echo operator answers
berth-groups --help > /dev/null && echo berth-groups answers
berth-analyze --journal /journal --out /tmp/out 2>&1; echo "berth-analyze exited $?"
"""
    journal = {"configMap": {"name": "demo-journal"}}
    phase, log = run_pod(node_kube, namespace, "runtime", "berth:0.1.0", script, journal=journal)
    assert phase == "Succeeded", log
    lines = log.splitlines()
    assert lines[:3] == ["present: []", "operator answers", "berth-groups answers"], log
    assert lines[3].startswith(
        "berth-analyze: error: the analytics job needs Berth's pipeline extra (pip install 'berth[pipeline]', or the "
        "berth-analytics image): "
    ), log
    assert lines[4:] == ["berth-analyze exited 1"], log


@pytest.mark.soak  # make soak: test_analytics_job.py runs the same image on a real journal in make test
def test_the_analytics_image_analyses_a_real_journal_and_draws_its_report(node_kube: Kube, namespace: str) -> None:
    started = time.monotonic()
    script = """
set -e
berth-analyze --journal /journal --master 'local[1]' --out /tmp/out 2> /tmp/progress || { cat /tmp/progress; exit 1; }
echo "classdata $(grep -c 'class data mapped from /opt/berth/class-data/' /tmp/progress)"
echo "advice $(python -c 'import json; print(json.dumps(json.load(open("/tmp/out/advice.json"))))')"
echo "svg $(grep -o '<svg' /tmp/out/report.html | wc -l)"
echo "files $(ls /tmp/out | tr '\\n' ' ')"
"""
    journal = {"configMap": {"name": "demo-journal"}}
    phase, log = run_pod(node_kube, namespace, "analytics", "berth-analytics:0.1.0", script, journal=journal)
    assert phase == "Succeeded", log[-4000:]
    found = {line.split(" ", 1)[0]: line.split(" ", 1)[1] for line in log.splitlines() if " " in line}
    assert json.loads(found["advice"])["groups"]["orders"]["restart_gap_p_ms"] == 662
    assert int(found["svg"]) >= 5
    # The JVM mapped the class-data archive the image's build wrote (read-only root, the image's own user).
    assert found["classdata"] == "1", log[-4000:]
    assert {"advice.json", "report.html", "summary.parquet"} <= set(found["files"].split())
    print(f"\nanalytics image: the demo journal analysed in a pod in {time.monotonic() - started:.0f} s")


def test_the_examples_image_holds_both_consumers_and_their_clients(node_kube: Kube, namespace: str) -> None:
    script = "python -c 'import kafka, confluent_kafka; print(\"clients\")' && ls /app"
    phase, log = run_pod(node_kube, namespace, "examples", "berth-examples:0.1.0", script)
    assert phase == "Succeeded", log
    assert log.split() == ["clients", "confluent_kafka_consumer.py", "kafka_python_consumer.py"]
