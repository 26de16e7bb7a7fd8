"""``berth-analyze``: the command line. Parses arguments, owns the SparkSession, maps failures to exit codes.

Two commands:
- ``berth-analyze --journal PATH --out DIR [...]``: analyse a journal, write advice.json, summary.parquet, report.html
  (``--journal-url`` downloads a running coordinator's journal first; ``--publish-configmap`` also puts the advice
  where the operator reads it);
- ``berth-analyze convert --journal PATH --out DIR [--partition-by date|group_id,date]``: JSON Lines -> Parquet.
Rules: the journal is checked before Spark starts; a missing or empty journal is one line on stderr and exit 1
(usage errors exit 2, as argparse does); a session this process did not create is neither reconfigured nor stopped.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from berth.pipeline.advice import AdviceSettings
from berth.pipeline.progress import Progress, count
from berth.pipeline.sources import FORMAT_CHOICES, JournalError, JournalSource, resolve_journal_source

if TYPE_CHECKING:
    from berth.pipeline.analyze import AnalysisResult

PROG = "berth-analyze"
EXIT_JOURNAL_ERROR = 1


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["convert"]:
        return convert_main(args[1:])
    return analyze_main(args)


def analyze_main(argv: Sequence[str]) -> int:
    parser = analyze_parser()
    args = parser.parse_args(argv)
    if args.token_file and not args.journal_url:
        parser.error("--token-file goes with --journal-url")
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

    from berth.pipeline.progress import Progress
    from berth.pipeline.publish import PublishError

    progress = Progress(enabled=not args.quiet)
    try:
        # Everything that can be checked is checked before the JVM starts (and before a download): errors cost none.
        publisher = _publisher(args) if args.publish_configmap else None
        with tempfile.TemporaryDirectory(prefix="berth-journal-") as download_dir:
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
    from berth.pipeline.analyze import AnalyzeOptions, analyze
    from berth.pipeline.session import open_session

    progress.say("starting Spark")
    owned = open_session(args.master, args.driver_memory)
    try:
        journal_label = args.journal_url or args.journal
        options = AnalyzeOptions(journal_label, args.out, settings, args.since, write_report=not args.no_report)
        return analyze(owned.spark, source, options, progress, now_ms=lambda: int(time.time() * 1000))
    finally:
        if owned.created_here:
            owned.spark.stop()


def _download(args: argparse.Namespace, directory: str, progress: Progress) -> str:
    from berth.pipeline.fetch import download_journal, read_token_file

    token = read_token_file(args.token_file) if args.token_file else None
    progress.say(f"downloading the journal from {args.journal_url}")
    events = download_journal(
        args.journal_url, token, directory, on_page=lambda n: progress.say(f"  {count(n)} events so far")
    )
    if events == 0:
        raise JournalError(f"journal is empty: the coordinator at {args.journal_url} has no events yet")
    progress.say(f"downloaded {count(events)} events")
    return directory


def _publisher(args: argparse.Namespace) -> Callable[[str], None]:
    """Checks the namespace and credentials now; the returned function publishes the advice at the end."""
    from berth.pipeline.publish import core_v1_api, own_namespace, publish_advice

    namespace = own_namespace(args.namespace, os.environ)
    api = core_v1_api()

    def publish(advice_text: str) -> None:
        outcome = publish_advice(api, namespace, args.publish_configmap, advice_text)
        print(f"{PROG}: {outcome} ConfigMap {namespace}/{args.publish_configmap}", file=sys.stderr)

    return publish


def convert_main(argv: Sequence[str]) -> int:
    from berth.pipeline.convert import DEFAULT_LAYOUT, PARTITION_LAYOUTS

    parser = argparse.ArgumentParser(
        prog=f"{PROG} convert",
        description="Convert a JSON Lines journal to Parquet, partitioned for large histories.",
    )
    parser.add_argument("--journal", required=True, help="segment directory, file or glob (JSON Lines)")
    parser.add_argument("--out", required=True, help="Parquet output directory (replaced)")
    parser.add_argument("--partition-by", choices=sorted(PARTITION_LAYOUTS), default=DEFAULT_LAYOUT)
    _add_spark_arguments(parser)
    args = parser.parse_args(argv)
    try:
        source = resolve_journal_source(args.journal, "jsonl")
    except JournalError as e:
        return _fail(e)

    from pyspark.sql import functions as F

    from berth.pipeline.convert import write_partitioned
    from berth.pipeline.readers import FLAGGED_SCHEMA, MALFORMED_LINE, read_journal
    from berth.pipeline.session import open_session

    progress = Progress(enabled=not args.quiet)
    progress.say("starting Spark")
    owned = open_session(args.master, args.driver_memory)
    try:
        progress.say(f"converting {args.journal} -> {args.out} (partitioned by {args.partition_by})")
        write_partitioned(read_journal(owned.spark, source), args.out, args.partition_by)
        # Counting from what was written costs a column scan, not a second parse of the JSON.
        written = owned.spark.read.schema(FLAGGED_SCHEMA).parquet(args.out)
        row = written.agg(F.count(F.lit(1)).alias("rows"), F.count(MALFORMED_LINE).alias("malformed")).first()
        assert row is not None
        progress.say(f"wrote {count(row['rows'] - row['malformed'])} events, {count(row['malformed'])} malformed lines")
    finally:
        if owned.created_here:
            owned.spark.stop()
    return 0


def parse_since(text: str) -> int:
    """``--since``: epoch milliseconds, or an ISO-8601 time (UTC when it has no offset)."""
    if text.strip().lstrip("-").isdigit():
        return int(text)
    try:
        moment = datetime.fromisoformat(text.strip())
    except ValueError as e:
        raise argparse.ArgumentTypeError(f"not epoch milliseconds nor an ISO-8601 time: {text!r}") from e
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return int(moment.timestamp() * 1000)


def analyze_parser() -> argparse.ArgumentParser:
    defaults = AdviceSettings()
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Analyse a Berth coordinator journal: rebalances, restart gaps and session-timeout advice. "
        f"Writes advice.json, summary.parquet and report.html. '{PROG} convert --help' for JSON Lines -> Parquet.",
    )
    journal = parser.add_mutually_exclusive_group(required=True)
    journal.add_argument("--journal", help="segment directory (*.jsonl), Parquet directory, file or glob")
    journal.add_argument(
        "--journal-url", help="a running coordinator's base URL: download its journal (GET /v1/journal) first"
    )
    parser.add_argument("--token-file", help="file holding the admin bearer token for --journal-url")
    parser.add_argument("--out", required=True, help="output directory (created; files in it replaced)")
    parser.add_argument("--format", choices=FORMAT_CHOICES, default="auto", help="journal format (default: detect)")
    parser.add_argument("--since", type=parse_since, help="only events at or after this time (ISO-8601 or epoch ms)")
    parser.add_argument("--percentile", type=float, default=defaults.percentile, help="restart-gap percentile")
    parser.add_argument("--safety-margin", type=float, default=defaults.safety_margin)
    parser.add_argument("--heartbeat-interval-ms", type=int, default=defaults.heartbeat_interval_ms)
    parser.add_argument("--min-ms", type=int, default=defaults.min_ms, help="lowest advised session timeout")
    parser.add_argument("--max-ms", type=int, default=defaults.max_ms, help="highest advised session timeout")
    parser.add_argument(
        "--confident-samples",
        type=int,
        default=defaults.confident_samples,
        help="restart gaps a group needs for confident advice",
    )
    parser.add_argument("--no-report", action="store_true", help="skip report.html")
    parser.add_argument(
        "--publish-configmap",
        metavar="NAME",
        help="also put advice.json into this ConfigMap (key advice.json), where the operator reads it",
    )
    parser.add_argument("--namespace", help="the ConfigMap's namespace (default: POD_NAMESPACE, else the pod's own)")
    _add_spark_arguments(parser)
    return parser


def _add_spark_arguments(parser: argparse.ArgumentParser) -> None:
    from berth.pipeline.session import DEFAULT_DRIVER_MEMORY, DEFAULT_MASTER

    parser.add_argument(
        "--master",
        help=f"Spark master when not run by spark-submit (default {DEFAULT_MASTER}; spark-submit's always wins)",
    )
    parser.add_argument(
        "--driver-memory", default=DEFAULT_DRIVER_MEMORY, help="driver heap when not run by spark-submit"
    )
    parser.add_argument("--quiet", action="store_true", help="no progress lines on stderr")


def _fail(error: Exception) -> int:
    print(f"{PROG}: error: {error}", file=sys.stderr)
    return EXIT_JOURNAL_ERROR


if __name__ == "__main__":
    sys.exit(main())
