"""The SparkSession ``berth-analyze`` runs on: embedded local by default, whatever spark-submit says otherwise.

Owns the session's configuration. Rules (SPARK-NOTES.md):
- A master set in code silently overrides ``spark-submit --master``; spark-submit's Python driver always has
  ``PYSPARK_GATEWAY_PORT`` in its environment, so the local default (and ``--master``) apply only without it.
- ``SPARK_LOCAL_IP`` defaults to 127.0.0.1 so a laptop run never binds the host's interface.
- Executors run this very interpreter (``PYSPARK_PYTHON``), so a venv install works without activation.
- No DataFrame call sites (``spark.python.sql.dataFrameDebugging.enabled``): they cost most of the py4j round trips
  of building a small journal's plans, and only add the Python line to an error message.
- Session time zone is UTC: hours and dates in the outputs never depend on the machine running the job.
- An already active session (tests, notebooks) is reused as it is, never reconfigured nor stopped.
- A local run starts lean: no web UI, the driver's heap and JVM options sized by ``sizing`` (a demo's journal and
  ten million events need different heaps; the options save half of a small run's JVM CPU).
- A local run's JVM maps a class-data archive of Spark's classes, or writes one when it exits (``class_data``):
  the options come in as ``extra_jvm_options``; ``spark_installation`` and ``jvm_process`` tell that module which
  Spark the JVM runs and which process it is.
- Shuffle partitions, adaptive execution and code generation are sized from the cores that run the job and the
  journal's size (``cluster.size_sql``), not from the driver's machine and not Spark's 200: that happens after the
  session starts, when the executors are known.
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from importlib import metadata

from pyspark import SparkContext
from pyspark.find_spark_home import _find_spark_home
from pyspark.sql import SparkSession

from berth.pipeline.arguments import DEFAULT_MASTER, LAUNCHED_BY_SPARK_SUBMIT
from berth.pipeline.sizing import JVM_OPTIONS


@dataclass(frozen=True)
class OwnedSession:
    """A session and whether this process created it (and so must stop it)."""

    spark: SparkSession
    created_here: bool


def launched_by_spark_submit() -> bool:
    return LAUNCHED_BY_SPARK_SUBMIT in os.environ


def spark_installation() -> tuple[str, str]:
    """The Spark home spark-submit runs from (its ``jars`` are the JVM's class path) and pyspark's version."""
    return _find_spark_home(), metadata.version("pyspark")


def jvm_process() -> subprocess.Popen[bytes] | None:
    """The driver JVM this process started (spark-submit execs it), or None (spark-submit started this process)."""
    gateway = SparkContext._gateway
    proc = getattr(gateway, "proc", None) if gateway is not None else None
    return proc if isinstance(proc, subprocess.Popen) else None


def local_settings(master: str | None, driver_memory: str, extra_jvm_options: str = "") -> dict[str, str]:
    """The settings a run started outside spark-submit gets (``driver_memory`` as Spark takes it, sized already);
    empty under spark-submit (its flags rule)."""
    if launched_by_spark_submit():
        return {}
    return {
        "spark.master": master or DEFAULT_MASTER,
        "spark.driver.memory": driver_memory,
        "spark.driver.extraJavaOptions": f"{JVM_OPTIONS} {extra_jvm_options}".strip(),
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
    }


def open_session(master: str | None, driver_memory: str, extra_jvm_options: str = "") -> OwnedSession:
    """The active session if there is one, else a new one configured per the module rules."""
    active = SparkSession.getActiveSession()
    if active is not None:
        return OwnedSession(active, created_here=False)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = SparkSession.builder.appName("berth-analyze")
    for key, value in local_settings(master, driver_memory, extra_jvm_options).items():
        builder = builder.config(key, value)
    spark = (
        builder.config("spark.sql.session.timeZone", "UTC")
        # The journal schema has 20 columns; the default (25) makes Spark warn about truncated plans.
        .config("spark.sql.debug.maxToStringFields", "100")
        # PySpark 4 otherwise tells the JVM the Python call site of every DataFrame and column function (five
        # py4j round trips around each: 5,000 of a small journal's 7,600 while building its plans); it only
        # enriches error messages.
        .config("spark.python.sql.dataFrameDebugging.enabled", "false")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("WARN")
    return OwnedSession(spark, created_here=True)
