"""Spark-on-Kubernetes container entry for Berth's analytics image: ``python -m berth.pipeline.k8s_entrypoint ARGS``.

Spark starts its driver and executor pods with the container arguments ``driver ...`` and ``executor``, expecting
the entrypoint of Spark's own images. Berth's analytics image runs programs by name under tini and holds no Spark
distribution, only pyspark; the pod templates in ``deploy/spark/`` point the container command here instead.
Rules: do what Spark's entrypoint.sh does, nothing more: ``driver`` runs ``spark-submit --deploy-mode client``
bound to the pod's address; ``executor`` runs the JVM executor backend with the settings Spark passes in the
environment; anything else is run as given. ``SPARK_HOME`` defaults to pyspark's installation. The process
replaces itself (``exec``), so tini's signals reach Spark directly. Command building is pure and tested.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

EXECUTOR_BACKEND = "org.apache.spark.scheduler.cluster.k8s.KubernetesExecutorBackend"
_JAVA_OPT = re.compile(r"^SPARK_JAVA_OPT_(\d+)$")


def spark_home(env: Mapping[str, str]) -> str:
    if env.get("SPARK_HOME"):
        return env["SPARK_HOME"]
    import pyspark  # only here: the command builders stay importable without it

    return str(Path(pyspark.__file__).parent)


def driver_command(args: Sequence[str], env: Mapping[str, str]) -> list[str]:
    """Spark's driver pod: submit in client mode from inside the pod, listening on the pod's address."""
    return [
        os.path.join(spark_home(env), "bin", "spark-submit"),
        "--conf",
        f"spark.driver.bindAddress={env.get('SPARK_DRIVER_BIND_ADDRESS', '0.0.0.0')}",
        "--deploy-mode",
        "client",
        *args,
    ]


def executor_command(env: Mapping[str, str]) -> list[str]:
    """Spark's executor pod: the executor backend JVM, configured by the variables Spark sets on the pod."""
    home = spark_home(env)
    java = os.path.join(env["JAVA_HOME"], "bin", "java") if env.get("JAVA_HOME") else "java"
    memory = env["SPARK_EXECUTOR_MEMORY"]
    return [
        java,
        *_java_options(env),
        f"-Xms{memory}",
        f"-Xmx{memory}",
        "-cp",
        _classpath(env, home),
        EXECUTOR_BACKEND,
        "--driver-url",
        env["SPARK_DRIVER_URL"],
        "--executor-id",
        env["SPARK_EXECUTOR_ID"],
        "--cores",
        env["SPARK_EXECUTOR_CORES"],
        "--app-id",
        env["SPARK_APPLICATION_ID"],
        "--hostname",
        env["SPARK_EXECUTOR_POD_IP"],
        "--resourceProfileId",
        env.get("SPARK_RESOURCE_PROFILE_ID", "0"),
        "--podName",
        env.get("SPARK_EXECUTOR_POD_NAME", ""),
    ]


def command_for(argv: Sequence[str], env: Mapping[str, str]) -> list[str]:
    if not argv:
        raise SystemExit("usage: python -m berth.pipeline.k8s_entrypoint driver ARGS... | executor | COMMAND...")
    if argv[0] == "driver":
        return driver_command(argv[1:], env)
    if argv[0] == "executor":
        return executor_command(env)
    return list(argv)


def _java_options(env: Mapping[str, str]) -> list[str]:
    """``SPARK_JAVA_OPT_0``, ``SPARK_JAVA_OPT_1``, ... in numeric order."""
    numbered = ((int(m.group(1)), value) for key, value in env.items() if (m := _JAVA_OPT.match(key)))
    return [value for _n, value in sorted(numbered)]


def _classpath(env: Mapping[str, str], home: str) -> str:
    conf_dir = env.get("SPARK_CONF_DIR") or os.path.join(home, "conf")
    entries = [
        conf_dir,
        env.get("HADOOP_CONF_DIR", ""),
        env.get("SPARK_CLASSPATH", ""),
        os.path.join(home, "jars", "*"),
        env.get("SPARK_EXTRA_CLASSPATH", ""),
        env.get("SPARK_DIST_CLASSPATH", ""),
    ]
    return ":".join(entry for entry in entries if entry)


def main(argv: Sequence[str] | None = None) -> None:
    command = command_for(sys.argv[1:] if argv is None else argv, os.environ)
    print(f"berth k8s entrypoint: {' '.join(command)}", file=sys.stderr, flush=True)
    os.execvp(command[0], command)


if __name__ == "__main__":
    main()
