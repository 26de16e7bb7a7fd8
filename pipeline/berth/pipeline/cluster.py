"""Where Spark's executors run and what they can reach: checked before the job, and answered in one line.

Owns what changes between the embedded mode and a cluster master. Rules:
- A master is *local* when it is ``local``, ``local[...]`` or ``local-cluster[...]``: its executors share the
  driver's machine and filesystem, so the checks below are skipped for it (they would only cost a job).
- With any other master (``spark://``, ``k8s://``, ``yarn``), a journal on a filesystem path (no scheme, or
  ``file://``) is read by the executors, not by the driver: one small job, a task per executor core, checks on
  the executors that every path the driver resolved exists there and holds the same kind of journal
  (``sources.resolve_journal_source``). A journal that only the driver sees is then one ``JournalError`` line,
  not a failed stage. A URI with another scheme (``s3a://``, ``hdfs://``) is the same storage everywhere.
- An output the executors write (``convert --out``) must be the very directory the driver commits: the driver
  leaves a token in a probe folder beside it, every executor must read it and leave its own, and the driver must
  see theirs. Otherwise: one line saying to use shared or object storage.
- A failure the checks could not foresee (an executor that joined later, a file removed meanwhile) is still one
  line: ``missing_file_error`` turns Spark's "file not found" into a ``JournalError``.
- Shuffle partitions: ``sizing.shuffle_partitions`` of the journal's bytes and the cores that run the job, cores
  taken from ``spark.default.parallelism``, else ``spark.executor.instances`` x ``spark.executor.cores``, else the
  cores of the executors registered (waiting up to ``EXECUTOR_WAIT_S`` for the first). A
  ``spark.sql.shuffle.partitions`` set explicitly (spark-submit ``--conf``) always wins. Cached frames keep their
  partitioning (AQE does not coalesce them), so Spark's default of 200 would run 200 tasks per stage for any
  journal. Adaptive execution and code generation follow from the partitions and the journal's size (``sizing``),
  unless set explicitly as well. Code generation is both kinds: whole-stage, and each expression's projection,
  predicate and ordering (``spark.sql.codegen.factoryMode``: ``NO_CODEGEN`` interprets them, ``FALLBACK`` is
  Spark's default, compiling them).
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import socket
import time
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from pyspark.sql import SparkSession

from berth.pipeline.sizing import adaptive_execution, shuffle_partitions, whole_stage_codegen
from berth.pipeline.sources import (
    JournalError,
    JournalSource,
    is_filesystem_path,
    is_local_master,
    resolve_journal_source,
)

EXECUTOR_WAIT_S = 30.0
_PROBE_TOKEN_FILE = "driver-token"
_MISSING_FILE = re.compile(r"FileNotFoundException|FILE_NOT_EXIST|PATH_NOT_FOUND|does not exist", re.IGNORECASE)


class OutputError(JournalError):
    """An output location the job cannot write as it must (one line, exit 1 like a journal error)."""


def _local(spark: SparkSession) -> bool:
    return is_local_master(spark.sparkContext.master or "local")


def check_executors_read(spark: SparkSession, source: JournalSource, label: str) -> None:
    """Raise ``JournalError`` when an executor cannot see the journal the driver resolved (module rules)."""
    if _local(spark) or not all(is_filesystem_path(p) for p in source.paths):
        return
    seen = _on_every_executor(spark, functools.partial(_journal_problems, source))
    for host, problem in seen:
        raise JournalError(
            f"journal {label} is not readable where Spark's executors run ({host}: {problem}); put it on storage "
            "every executor reads: a shared volume, HDFS or an object store (docs/pipeline.md, 'On a cluster')"
        )


def check_executors_write(spark: SparkSession, out: str) -> None:
    """Raise ``OutputError`` unless the executors and the driver see the same ``out`` directory (module rules)."""
    if _local(spark) or not is_filesystem_path(out):
        return
    local_out = out.removeprefix("file://")
    parent = os.path.dirname(os.path.abspath(local_out))
    try:
        os.makedirs(parent, exist_ok=True)
        probe = os.path.join(parent, f".berth-write-check-{uuid.uuid4().hex}")
        os.mkdir(probe)
    except OSError as e:
        raise OutputError(f"--out {out}: cannot create it on the driver ({e.strerror or e})") from e
    token = uuid.uuid4().hex
    try:
        with open(os.path.join(probe, _PROBE_TOKEN_FILE), "w", encoding="utf-8") as f:
            f.write(token)
        problems = _on_every_executor(spark, functools.partial(_write_problems, probe, token))
        if not problems and not any(name.startswith("executor-") for name in os.listdir(probe)):
            problems = [("driver", "the executors' files are not visible on the driver")]
    finally:
        shutil.rmtree(probe, ignore_errors=True)
    for host, problem in problems:
        raise OutputError(
            f"--out {out} is not storage the executors and the driver share ({host}: {problem}); the executors "
            "write the Parquet and the driver commits it: use a shared volume, HDFS or an object store (s3a://...)"
        )


def missing_file_error(error: Exception, label: str) -> JournalError | None:
    """Spark's failure to find a journal file, as one line; None for any other failure."""
    text = str(error)
    if not _MISSING_FILE.search(text):
        return None
    detail = next((line.strip() for line in text.splitlines() if _MISSING_FILE.search(line)), "")
    return JournalError(
        f"journal {label}: a file vanished or is not visible where Spark's executors run ({detail[:200]}); put the "
        "journal on storage every executor reads (docs/pipeline.md, 'On a cluster')"
    )


# Spark's switch between compiled (Janino) and interpreted projections, predicates and orderings.
CODEGEN_FACTORY_MODE = "spark.sql.codegen.factoryMode"


@dataclass(frozen=True)
class SqlSizing:
    """What ``size_sql`` settled on: shuffle partitions, the cores counted, adaptive execution, code generation."""

    partitions: int
    cores: int
    adaptive: bool
    codegen: bool


def size_sql(spark: SparkSession, journal_bytes: int | None) -> SqlSizing:
    """Size the session's SQL settings to the cores that run the job and the journal's size (module rules):
    shuffle partitions, adaptive execution and code generation (whole-stage and per expression), each unless set
    explicitly."""
    cores = job_cores(spark)
    partitions = int(_sized(spark, "spark.sql.shuffle.partitions", str(shuffle_partitions(journal_bytes, cores))))
    adaptive = _sized(spark, "spark.sql.adaptive.enabled", _flag(adaptive_execution(partitions))) == "true"
    codegen = _sized(spark, "spark.sql.codegen.wholeStage", _flag(whole_stage_codegen(journal_bytes))) == "true"
    _sized(spark, CODEGEN_FACTORY_MODE, "FALLBACK" if codegen else "NO_CODEGEN")
    return SqlSizing(partitions, cores, adaptive, codegen)


def _sized(spark: SparkSession, key: str, value: str) -> str:
    """``value`` set as ``key``, unless the session's configuration names it (spark-submit's ``--conf``): then that."""
    conf = spark.sparkContext.getConf()
    if conf.contains(key):
        return (conf.get(key) or "").strip().lower()
    spark.conf.set(key, value)
    return value


def _flag(on: bool) -> str:
    return "true" if on else "false"


def job_cores(spark: SparkSession) -> int:
    """How many tasks can run at once: the configured parallelism or executors, else what has registered."""
    conf = spark.sparkContext.getConf()
    if conf.contains("spark.default.parallelism"):
        return int(conf.get("spark.default.parallelism") or 1)
    instances, cores = conf.get("spark.executor.instances"), conf.get("spark.executor.cores")
    if instances and cores and not _local(spark):
        return int(instances) * int(cores)
    if not _local(spark):
        _wait_for_an_executor(spark)
    return int(spark.sparkContext.defaultParallelism)


def _wait_for_an_executor(spark: SparkSession) -> None:
    """Until one executor has registered (its cores count in ``defaultParallelism``), at most EXECUTOR_WAIT_S."""
    deadline = time.monotonic() + EXECUTOR_WAIT_S
    tracker = spark.sparkContext._jsc.sc().statusTracker()  # the executor list is not in PySpark's API
    while len(tracker.getExecutorInfos()) < 2 and time.monotonic() < deadline:  # the driver is listed too
        time.sleep(0.2)


def _on_every_executor(spark: SparkSession, check: functools.partial[list[str]]) -> list[tuple[str, str]]:
    """Run ``check`` in one task per core the job has (so every executor gets one); ``(host, problem)`` pairs."""
    tasks = max(2, job_cores(spark))
    spark.sparkContext.setJobDescription("berth-analyze: can the executors reach the journal and output?")
    try:
        found = (
            spark.sparkContext.parallelize(range(tasks), tasks)
            .mapPartitions(functools.partial(_report, check))
            .collect()
        )
    finally:
        spark.sparkContext.setJobDescription(None)  # type: ignore[arg-type]
    return sorted(set(found))


def _report(check: functools.partial[list[str]], _partition: Iterable[int]) -> Iterator[tuple[str, str]]:
    host = socket.gethostname()
    for problem in check():
        yield host, problem


def _journal_problems(source: JournalSource) -> list[str]:
    """On an executor: what differs from the driver's view of the journal's paths."""
    problems = []
    for path in source.paths:
        local = path.removeprefix("file://")
        if not os.path.exists(local):
            problems.append(f"{path} not found")
        elif not os.access(local, os.R_OK):
            problems.append(f"{path}: permission denied")
        elif os.path.isdir(local):
            try:
                seen = resolve_journal_source(path, source.format)
            except JournalError as e:
                problems.append(str(e))
            else:
                if seen.format != source.format:
                    problems.append(f"{path} reads as {seen.format}, on the driver as {source.format}")
    return problems


def _write_problems(probe: str, token: str) -> list[str]:
    """On an executor: can it see the driver's token in ``probe``, and leave a file there for the driver?"""
    try:
        with open(os.path.join(probe, _PROBE_TOKEN_FILE), encoding="utf-8") as f:
            if f.read() != token:
                return [f"{probe} holds another run's files"]
        with open(os.path.join(probe, f"executor-{os.getpid()}"), "w", encoding="utf-8") as f:
            f.write(token)
    except FileNotFoundError:
        return [f"the driver's folder {os.path.dirname(probe)} is not visible here"]
    except OSError as e:
        return [f"cannot write in {os.path.dirname(probe)}: {e.strerror or e}"]
    return []
