"""Fixtures for the pipeline tests: ONE local SparkSession for the whole test run.

The session is tuned for tiny inputs on a small machine (SPARK-NOTES.md): one core, two shuffle partitions, no
UI, bound to 127.0.0.1, a JVM that skips the expensive JIT tier. Journal builders live in ``pipeline_builders``.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator

import pytest
from pyspark.sql import SparkSession

# berth-analyze processes the tests start write no class-data archive into the home folder (a first run would
# spend seconds writing it); test_class_data.py names its own folder.
os.environ.setdefault("BERTH_CLASS_DATA", "off")


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ["PYSPARK_PYTHON"] = sys.executable
    session = (
        SparkSession.builder.master("local[1]")
        .appName("berth-pipeline-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        # Adaptive execution re-plans after every shuffle: worth it for big inputs, seconds lost per query on
        # tests' handfuls of rows. It never changes a result.
        .config("spark.sql.adaptive.enabled", "false")
        .config("spark.default.parallelism", "2")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.extraJavaOptions", "-XX:+UseSerialGC -XX:TieredStopAtLevel=1")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.debug.maxToStringFields", "100")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()
