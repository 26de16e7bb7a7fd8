"""``berth-analyze``'s two command lines: every flag, its help and its default, and the value parsers.

Owns what ``--help`` says. Rules: every flag has help text, and every default that is a value is shown
(``(default: ...)``); flags without a value default say in words what happens without them; help is plain text
(no reST markup), and ``--version`` prints the installed distribution's version. Nothing here imports Spark, so
``--help`` and ``--version`` answer at once.
"""

from __future__ import annotations

import argparse
from datetime import UTC, datetime
from importlib import metadata

from berth.pipeline.advice_settings import AdviceSettings
from berth.pipeline.sources import FORMAT_CHOICES

PROG = "berth-analyze"
DEFAULT_MASTER = "local[*]"
DEFAULT_DRIVER_MEMORY = "auto"
# spark-submit's Python driver always has it in its environment: then spark-submit's flags, not ours, rule.
LAUNCHED_BY_SPARK_SUBMIT = "PYSPARK_GATEWAY_PORT"
# ``convert --partition-by``: layout name -> the partition columns, outermost first (the converter's layouts).
PARTITION_LAYOUTS = {"date": ("date",), "group_id,date": ("group_id", "date")}
DEFAULT_LAYOUT = "date"


class HelpFormatter(argparse.HelpFormatter):
    """argparse's formatter, plus ``(default: X)`` after every flag whose default is a value (not None/False)."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        default = action.default
        shown = default not in (None, False, argparse.SUPPRESS) and "%(default)" not in text
        if shown and action.option_strings and action.nargs != 0:
            text += " (default: %(default)s)"
        return text


def version() -> str:
    try:
        return metadata.version("berth")
    except metadata.PackageNotFoundError:  # a source tree that was never installed
        return "unknown"


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
        formatter_class=HelpFormatter,
        description="Analyse a Berth coordinator journal: rebalances, restart gaps and session-timeout advice. "
        f"Writes advice.json, summary.parquet and report.html into --out. '{PROG} convert --help': JSON Lines to "
        "Parquet for large histories.",
    )
    _add_version(parser)
    journal = parser.add_mutually_exclusive_group(required=True)
    journal.add_argument(
        "--journal",
        help="segment directory (*.jsonl), Parquet directory, file, glob, or a URI (s3a://, hdfs://); with a cluster "
        "master it must be readable where the executors run",
    )
    journal.add_argument(
        "--journal-url", help="a running coordinator's base URL: download its journal (GET /v1/journal) first"
    )
    parser.add_argument(
        "--also-journal",
        action="append",
        default=[],
        metavar="FILE",
        help="with --journal-url: a JSON Lines journal file read together with the download, such as the operator's "
        "Kafka evidence (docs/kafka.md); a missing or empty one is skipped with a line saying so (repeatable)",
    )
    parser.add_argument(
        "--token-file",
        help="file holding a bearer token for --journal-url: an admin token or one with the journal:read scope "
        "(without it: no token is sent)",
    )
    parser.add_argument(
        "--ca-file",
        help="PEM CA bundle an https --journal-url is verified against (default: the system's CAs)",
    )
    parser.add_argument(
        "--staging-dir",
        help="where --journal-url downloads to (a new folder inside it, removed afterwards); required with a cluster "
        "master, and then on storage every executor reads (without it: a local temporary folder)",
    )
    parser.add_argument(
        "--out", required=True, help="output directory, written by the driver (created; files replaced)"
    )
    parser.add_argument("--format", choices=FORMAT_CHOICES, default="auto", help="journal format; auto detects it")
    parser.add_argument(
        "--since", type=parse_since, help="only events at or after this time, ISO-8601 or epoch ms (default: all)"
    )
    parser.add_argument("--percentile", type=float, default=defaults.percentile, help="restart-gap percentile")
    parser.add_argument(
        "--safety-margin", type=float, default=defaults.safety_margin, help="factor on the restart-gap percentile"
    )
    parser.add_argument(
        "--heartbeat-interval-ms",
        type=int,
        default=defaults.heartbeat_interval_ms,
        help="one heartbeat interval added to the advice",
    )
    parser.add_argument("--min-ms", type=int, default=defaults.min_ms, help="lowest advised session timeout")
    parser.add_argument("--max-ms", type=int, default=defaults.max_ms, help="highest advised session timeout")
    parser.add_argument(
        "--confident-samples",
        type=int,
        default=defaults.confident_samples,
        help="restart gaps a group needs for confident advice",
    )
    parser.add_argument("--no-report", action="store_true", help="skip report.html (and never load matplotlib)")
    parser.add_argument(
        "--publish-configmap",
        metavar="NAME",
        help="also put advice.json into this ConfigMap (key advice.json), where the operator reads it",
    )
    parser.add_argument("--namespace", help="the ConfigMap's namespace (default: POD_NAMESPACE, else the pod's own)")
    _add_spark_arguments(parser)
    return parser


def convert_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=f"{PROG} convert",
        formatter_class=HelpFormatter,
        description="Convert a JSON Lines journal to Parquet, partitioned for large histories. Spark's executors "
        "write the Parquet and the driver commits it: with a cluster master, --out must be storage both see (a "
        "shared volume, HDFS or an object store); that is checked before the conversion starts.",
    )
    _add_version(parser)
    parser.add_argument(
        "--journal", required=True, help="segment directory, file or glob (JSON Lines), or a URI (s3a://, hdfs://)"
    )
    parser.add_argument("--out", required=True, help="Parquet output directory or URI (replaced)")
    parser.add_argument(
        "--partition-by",
        choices=sorted(PARTITION_LAYOUTS),
        default=DEFAULT_LAYOUT,
        help="directory layout of the Parquet",
    )
    _add_spark_arguments(parser)
    return parser


def _add_version(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--version", action="version", version=f"{PROG} {version()}")


def _add_spark_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--master",
        help=f"Spark master when not run by spark-submit (default: {DEFAULT_MASTER}; spark-submit's always wins)",
    )
    parser.add_argument(
        "--driver-memory",
        default=DEFAULT_DRIVER_MEMORY,
        help="driver heap when not run by spark-submit, e.g. 2g; auto sizes it from the journal's size and the "
        "container's memory limit",
    )
    parser.add_argument(
        "--class-data",
        metavar="DIR",
        help="folder of the class-data archive of Spark's classes, written by the first run and mapped by the next "
        "ones for a faster start; 'off' for none (default: $BERTH_CLASS_DATA, else ~/.cache/berth/class-data, "
        "i.e. under $XDG_CACHE_HOME when set)",
    )
    parser.add_argument(
        "--class-data-write",
        choices=("first-run", "never"),
        default="first-run",
        help="'never': map the class-data archive if there is one, but never write it (writing it makes the first "
        "run wait about a minute for its JVM at exit)",
    )
    parser.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
