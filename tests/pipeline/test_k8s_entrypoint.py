"""The Spark-on-Kubernetes entry of Berth's image: the commands Spark's driver and executor pods end up running."""

from __future__ import annotations

from berth.pipeline.k8s_entrypoint import command_for

SPARK = "/opt/berth/lib/python3.11/site-packages/pyspark"


def test_the_driver_pod_submits_in_client_mode_bound_to_its_own_address() -> None:
    env = {"SPARK_HOME": SPARK, "SPARK_DRIVER_BIND_ADDRESS": "10.1.2.3"}
    args = ["driver", "--properties-file", "/opt/spark/conf/spark.properties", "local:///job.py", "--out", "/o"]

    assert command_for(args, env) == [
        f"{SPARK}/bin/spark-submit",
        "--conf",
        "spark.driver.bindAddress=10.1.2.3",
        "--deploy-mode",
        "client",
        "--properties-file",
        "/opt/spark/conf/spark.properties",
        "local:///job.py",
        "--out",
        "/o",
    ]


def test_the_executor_pod_runs_the_executor_backend_from_the_environment_spark_sets() -> None:
    env = {
        "SPARK_HOME": SPARK,
        "JAVA_HOME": "/usr/lib/jvm/java-17",
        "SPARK_EXECUTOR_MEMORY": "2g",
        "SPARK_JAVA_OPT_10": "-Dlast=1",
        "SPARK_JAVA_OPT_2": "-Dsecond=1",
        "SPARK_JAVA_OPT_0": "-Dfirst=1",
        "SPARK_DRIVER_URL": "spark://CoarseGrainedScheduler@driver-svc:7078",
        "SPARK_EXECUTOR_ID": "3",
        "SPARK_EXECUTOR_CORES": "2",
        "SPARK_APPLICATION_ID": "spark-abc",
        "SPARK_EXECUTOR_POD_IP": "10.1.2.4",
        "SPARK_RESOURCE_PROFILE_ID": "0",
        "SPARK_EXECUTOR_POD_NAME": "berth-analyze-exec-3",
    }

    assert command_for(["executor"], env) == [
        "/usr/lib/jvm/java-17/bin/java",
        "-Dfirst=1",
        "-Dsecond=1",
        "-Dlast=1",
        "-Xms2g",
        "-Xmx2g",
        "-cp",
        f"{SPARK}/conf:{SPARK}/jars/*",
        "org.apache.spark.scheduler.cluster.k8s.KubernetesExecutorBackend",
        "--driver-url",
        "spark://CoarseGrainedScheduler@driver-svc:7078",
        "--executor-id",
        "3",
        "--cores",
        "2",
        "--app-id",
        "spark-abc",
        "--hostname",
        "10.1.2.4",
        "--resourceProfileId",
        "0",
        "--podName",
        "berth-analyze-exec-3",
    ]


def test_anything_else_runs_as_given() -> None:
    assert command_for(["berth-analyze", "--help"], {}) == ["berth-analyze", "--help"]
