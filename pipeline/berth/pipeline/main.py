"""``berth-analyze``: the command line. Runs the arguments (``arguments``), owns the SparkSession, maps failures to
exit codes.

Two commands:
- ``berth-analyze --journal PATH --out DIR [...]``: analyse a journal, write advice.json, summary.parquet, report.html
  (``--journal-url`` downloads a running coordinator's journal first; ``--publish-configmap`` also puts the advice
  where the operator reads it);
- ``berth-analyze convert --journal PATH --out DIR [--partition-by date|group_id,date]``: JSON Lines -> Parquet.
Rules: what can be checked before Spark starts is (the journal on the driver, the output folder, the download's
place); what only the executors can tell is checked as soon as the session runs (``cluster``). A missing, empty or
unreachable journal or output is one line on stderr and exit 1 (usage errors exit 2, as argparse does); a closed
stdout or stderr (``| head``) ends the command quietly; a session this process did not create is neither
reconfigured nor stopped. Spark (and matplotlib, for the report only) are imported when a run needs them;
pyarrow and matplotlib in a thread of their own while the JVM starts.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING

from berth.pipeline.advice_settings import AdviceSettings
from berth.pipeline.arguments import DEFAULT_MASTER, LAUNCHED_BY_SPARK_SUBMIT, PROG, analyze_parser, convert_parser
from berth.pipeline.progress import Progress, count
from berth.pipeline.sizing import driver_memory, memory_limit_bytes
from berth.pipeline.sources import (
    JournalError,
    JournalSource,
    is_local_master,
    journal_bytes,
    resolve_journal_source,
)

if TYPE_CHECKING:
    from berth.pipeline.analyze import AnalysisResult
    from berth.pipeline.class_data import Plan
    from berth.pipeline.session import OwnedSession

EXIT_JOURNAL_ERROR = 1
EXIT_CLOSED_PIPE = 141  # 128 + SIGPIPE, what a shell reports for a command killed by a closed pipe
# How long a run that writes the class-data archive waits for its JVM to write it (seconds: ~15 on a busy machine).
CLASS_DATA_WRITE_TIMEOUT_S = 300
# What the pipeline extra brings (pyproject.toml): without it, berth-analyze says how to get it in one line.
PIPELINE_EXTRA_MODULES = frozenset({"pyspark", "py4j", "pyarrow", "pandas", "matplotlib"})


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        if args[:1] == ["convert"]:
            return convert_main(args[1:])
        return analyze_main(args)
    except BrokenPipeError:
        return _quiet_after_closed_pipe()
    except ModuleNotFoundError as e:
        if (e.name or "").split(".")[0] not in PIPELINE_EXTRA_MODULES:
            raise
        return _fail(
            "the analytics job needs Berth's pipeline extra (pip install 'berth[pipeline]', or the berth-analytics "
            f"image): {e.name} is not installed"
        )


def analyze_main(argv: Sequence[str]) -> int:
    parser = analyze_parser()
    args = parser.parse_args(argv)
    if args.token_file and not args.journal_url:
        parser.error("--token-file goes with --journal-url")
    if args.staging_dir and not args.journal_url:
        parser.error("--staging-dir goes with --journal-url")
    if args.ca_file and not args.journal_url:
        parser.error("--ca-file goes with --journal-url")
    if args.also_journal and not args.journal_url:
        parser.error("--also-journal goes with --journal-url (with --journal, name a folder or a glob instead)")
    try:
        settings = AdviceSettings(
            percentile=args.percentile,
            safety_margin=args.safety_margin,
            heartbeat_interval_ms=args.heartbeat_interval_ms,
            min_ms=args.min_ms,
            max_ms=args.max_ms,
            confident_samples=args.confident_samples,
        )
    except ValueError as e:
        parser.error(str(e))

    from berth.pipeline.publish import PublishError

    progress = Progress(enabled=not args.quiet)
    try:
        # Everything that can be checked is checked before the JVM starts (and before a download): errors cost none.
        publisher = _publisher(args) if args.publish_configmap else None
        _check_creatable(args.out)
        if args.journal_url:
            _check_staging_fits_master(args, master=_planned_master(args))
        with _download_place(args.staging_dir) as download_dir:
            journal = args.journal if args.journal_url is None else _download(args, download_dir, progress)
            source = resolve_journal_source(journal, args.format)
            result = _analyze(args, settings, source, progress)
        if publisher is not None:
            publisher(result.advice_text)
    except (JournalError, PublishError) as e:
        return _fail(e)
    rate = result.journal.events / max(progress.elapsed_s(), 1e-9)
    progress.say(
        f"done: {count(result.journal.events, 'event')}, {count(result.groups, 'group')}, advice for "
        f"{result.advised_groups:,} ({rate:,.0f} events/s overall) -> {args.out}"
    )
    return 0


def _analyze(
    args: argparse.Namespace, settings: AdviceSettings, source: JournalSource, progress: Progress
) -> AnalysisResult:
    from berth.pipeline.cluster import check_executors_read

    journal_label = args.journal_url or args.journal
    # pyarrow (and matplotlib for the report) load while the JVM starts, when this thread only waits for it.
    preload = functools.partial(_load_analysis_modules, report=not args.no_report)
    threading.Thread(target=preload, name="load-analysis-modules", daemon=True).start()
    with _session(args, source, progress) as owned:
        from berth.pipeline.analyze import AnalyzeOptions, analyze

        if args.journal_url:
            _check_staging_fits_master(args, master=owned.spark.sparkContext.master)
        check_executors_read(owned.spark, source, journal_label)
        options = AnalyzeOptions(journal_label, args.out, settings, args.since, write_report=not args.no_report)
        return analyze(owned.spark, source, options, progress, now_ms=lambda: int(time.time() * 1000))


def _load_analysis_modules(report: bool) -> None:
    """Import the analysis' modules (an import of them elsewhere waits for this one and never imports twice; a
    missing one fails there, as one line)."""
    with contextlib.suppress(ImportError):
        # py4j's argument converters import it (and pandas with it) at the session's first call, else.
        import pyspark.testing.utils  # noqa: F401

        import berth.pipeline.analyze

        if report:
            import berth.pipeline.report  # noqa: F401


@contextlib.contextmanager
def _session(args: argparse.Namespace, source: JournalSource, progress: Progress) -> Iterator[OwnedSession]:
    """The session for one command, sized to its journal (``sizing``): the driver's heap, and shuffle partitions,
    adaptive execution and code generation for the journal and the cores that run it, its JVM started with the
    class-data archive (``class_data``); stopped after when this process created it (and the archive written then,
    when this run writes it)."""
    from berth.pipeline.class_data import finish_writing
    from berth.pipeline.cluster import size_sql
    from berth.pipeline.session import jvm_process, open_session

    size = journal_bytes(source)
    heap = driver_memory(args.driver_memory, size, source.format, memory_limit_bytes())
    read = "" if size is None else f" ({size / 2**20:,.1f} MiB of journal)"
    archive = _class_data_plan(args.class_data, heap, write=getattr(args, "class_data_write", "") != "never")
    progress.say(f"starting Spark{read}")
    if archive.action != "use" and archive.note:
        progress.say(archive.note)
    owned = open_session(args.master, heap, archive.jvm_options())
    jvm = jvm_process() if owned.created_here else None
    try:
        if owned.created_here:
            _say_class_data_mapped(archive, jvm, progress)
            sized = size_sql(owned.spark, size)
            conf = owned.spark.sparkContext.getConf()
            lean = [name for name, on in (("adaptive execution", sized.adaptive), ("codegen", sized.codegen)) if not on]
            progress.say(
                f"Spark master {conf.get('spark.master')} ({count(sized.cores, 'core')}, driver heap "
                f"{conf.get('spark.driver.memory', '1g')}), {count(sized.partitions, 'shuffle partition')}"
                + (f", no {' or '.join(lean)}" if lean else "")
            )
        yield owned
    finally:
        if owned.created_here:
            owned.spark.stop()
            finish_writing(archive, jvm, CLASS_DATA_WRITE_TIMEOUT_S, progress.say)


def _class_data_plan(directory: str | None, heap: str, *, write: bool = True) -> Plan:
    """What this run does with the class-data archive; nothing when it starts no JVM of its own (spark-submit
    started it, or a session or gateway is already running in this process)."""
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

    from berth.pipeline.class_data import JavaRuntime, Plan, default_directory, plan
    from berth.pipeline.session import launched_by_spark_submit, spark_installation
    from berth.pipeline.sizing import JVM_OPTIONS

    if launched_by_spark_submit() or SparkSession.getActiveSession() is not None or SparkContext._gateway is not None:
        return Plan("none", None, "")  # nothing to say: the JVM's options are not this run's
    spark_home, spark_version = spark_installation()
    return plan(
        directory or default_directory(os.environ),
        java=JavaRuntime.find(os.environ),
        spark_home=spark_home,
        spark_version=spark_version,
        jvm_options=JVM_OPTIONS,
        driver_memory=heap,
        pid=os.getpid(),
        write=write,
    )


def _say_class_data_mapped(archive: Plan, jvm: subprocess.Popen[bytes] | None, progress: Progress) -> None:
    """Whether the JVM took the archive it was given: one line either way (nothing when /proc cannot tell)."""
    from berth.pipeline.class_data import mapped

    if archive.action != "use" or archive.archive is None or jvm is None:
        return
    taken = mapped(jvm.pid, archive.archive)
    if taken:
        progress.say(f"class data mapped from {archive.archive}")
    elif taken is False:
        progress.say(
            f"class-data archive {archive.archive} refused by the JVM (written by another Java or Spark?); running "
            "without it (remove the file to have the next run write it again, or --class-data off)"
        )


def _planned_master(args: argparse.Namespace) -> str | None:
    """The master known before Spark starts (None under spark-submit: then the session tells)."""
    return None if LAUNCHED_BY_SPARK_SUBMIT in os.environ else args.master or DEFAULT_MASTER


def _check_staging_fits_master(args: argparse.Namespace, master: str | None) -> None:
    """A download into a driver-local folder is invisible to executors on other machines: refuse it in one line."""
    if master is None or args.staging_dir or is_local_master(master):
        return
    raise JournalError(
        f"--journal-url with the cluster master {master} needs --staging-dir: a folder on storage every executor "
        "reads (a shared volume), where the journal is downloaded before the executors read it"
    )


@contextlib.contextmanager
def _download_place(staging_dir: str | None) -> Iterator[str]:
    """A new folder for a download: in ``staging_dir`` when given (shared storage), else a local temporary one;
    removed afterwards either way."""
    if staging_dir is not None:
        try:
            os.makedirs(staging_dir, exist_ok=True)
            directory = tempfile.mkdtemp(prefix="journal-", dir=staging_dir)
        except OSError as e:
            raise JournalError(f"--staging-dir {staging_dir}: {e.strerror or e}") from e
    else:
        directory = tempfile.mkdtemp(prefix="berth-journal-")
    try:
        yield directory
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def _download(args: argparse.Namespace, directory: str, progress: Progress) -> str:
    from berth.pipeline.fetch import download_journal, read_token_file

    token = read_token_file(args.token_file) if args.token_file else None
    progress.say(f"downloading the journal from {args.journal_url}")
    events = download_journal(
        args.journal_url,
        token,
        directory,
        on_page=lambda n: progress.say(f"  {count(n)} events so far"),
        ca_file=args.ca_file,
    )
    progress.say(f"downloaded {count(events)} events into {directory}")
    also = _add_also_journals(args.also_journal, directory, progress)
    if events == 0 and not also:
        raise JournalError(f"journal is empty: the coordinator at {args.journal_url} has no events yet")
    return directory


def _add_also_journals(paths: list[str], directory: str, progress: Progress) -> int:
    """Copy each ``--also-journal`` file that has events into the download folder as a segment of its own, so one
    read covers both; returns how many were added. A missing or empty one (no Kafka fleet yet) is skipped."""
    added = 0
    for n, path in enumerate(paths):
        try:
            empty = os.path.getsize(path) == 0
        except OSError:
            progress.say(f"--also-journal {path}: not there, skipped")
            continue
        if empty:
            progress.say(f"--also-journal {path}: no events yet, skipped")
            continue
        try:
            shutil.copyfile(path, os.path.join(directory, f"segment-also-{n:04d}.jsonl"))
        except OSError as e:
            raise JournalError(f"--also-journal {path}: {e.strerror or e}") from e
        progress.say(f"--also-journal {path}: read with the download")
        added += 1
    return added


def _publisher(args: argparse.Namespace) -> Callable[[str], None]:
    """Checks the namespace and credentials now; the returned function publishes the advice at the end."""
    from berth.pipeline.publish import core_v1_api, own_namespace, publish_advice

    namespace = own_namespace(args.namespace, os.environ)
    api = core_v1_api()

    def publish(advice_text: str) -> None:
        outcome = publish_advice(api, namespace, args.publish_configmap, advice_text)
        print(f"{PROG}: {outcome} ConfigMap {namespace}/{args.publish_configmap}", file=sys.stderr)

    return publish


def _check_creatable(out: str) -> None:
    """``--out`` (a folder the driver writes) exists as a writable folder, or could be created: else one line."""
    path = os.path.abspath(out)
    if os.path.exists(path) and not os.path.isdir(path):
        raise JournalError(f"--out {out} is a file, not a folder")
    existing = path
    while not os.path.exists(existing):
        existing = os.path.dirname(existing)
    if not os.access(existing, os.W_OK | os.X_OK):
        raise JournalError(f"--out {out}: {existing} is not writable")


def convert_main(argv: Sequence[str]) -> int:
    args = convert_parser().parse_args(argv)
    try:
        source = resolve_journal_source(args.journal, "jsonl")
        progress = Progress(enabled=not args.quiet)
        with _session(args, source, progress) as owned:
            from berth.pipeline.cluster import check_executors_read, check_executors_write

            check_executors_read(owned.spark, source, args.journal)
            check_executors_write(owned.spark, args.out)
            _convert(owned, source, args, progress)
    except JournalError as e:
        return _fail(e)
    return 0


def _convert(owned: OwnedSession, source: JournalSource, args: argparse.Namespace, progress: Progress) -> None:
    from pyspark.sql import functions as F

    from berth.pipeline.convert import write_partitioned
    from berth.pipeline.readers import FLAGGED_SCHEMA, MALFORMED_LINE, read_journal

    progress.say(f"converting {args.journal} -> {args.out} (partitioned by {args.partition_by})")
    write_partitioned(read_journal(owned.spark, source), args.out, args.partition_by)
    # Counting from what was written costs a column scan, not a second parse of the JSON.
    written = owned.spark.read.schema(FLAGGED_SCHEMA).parquet(args.out)
    row = written.agg(F.count(F.lit(1)).alias("rows"), F.count(MALFORMED_LINE).alias("malformed")).first()
    assert row is not None
    progress.say(f"wrote {count(row['rows'] - row['malformed'])} events, {count(row['malformed'])} malformed lines")


def _fail(error: Exception | str) -> int:
    print(f"{PROG}: error: {error}", file=sys.stderr)
    return EXIT_JOURNAL_ERROR


def _quiet_after_closed_pipe() -> int:
    """The reader went away (``| head``): say nothing more, and keep Python's exit flush from raising again."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            os.dup2(devnull, stream.fileno())
    return EXIT_CLOSED_PIPE


if __name__ == "__main__":
    sys.exit(main())
