"""Who decides the master (spark-submit, always, when it launched us), the command line's habits (``--version``,
help with defaults, quiet on a closed pipe), what a cluster master requires, ``--since`` parsing, progress lines."""

from __future__ import annotations

import argparse
import io
import os
import subprocess
import sys
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from berth.pipeline.arguments import parse_since
from berth.pipeline.cluster import CODEGEN_FACTORY_MODE, SqlSizing, size_sql
from berth.pipeline.progress import Progress
from berth.pipeline.session import local_settings
from berth.pipeline.sizing import SMALL_JOURNAL_BYTES


def test_outside_spark_submit_the_local_default_or_the_given_master_applies(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PYSPARK_GATEWAY_PORT", raising=False)

    assert local_settings(None, "4g")["spark.master"] == "local[*]"
    assert local_settings("local[2]", "2g")["spark.master"] == "local[2]"
    assert local_settings("local[2]", "2g")["spark.driver.memory"] == "2g"


def test_a_local_run_starts_lean_no_web_ui_and_the_client_compiler_with_the_serial_collector(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("PYSPARK_GATEWAY_PORT", raising=False)

    settings = local_settings("local[2]", "1g")
    assert settings["spark.ui.enabled"] == "false"
    assert settings["spark.driver.extraJavaOptions"] == "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"


def test_under_spark_submit_nothing_is_set_in_code(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYSPARK_GATEWAY_PORT", "41234")

    assert local_settings("local[2]", "4g") == {}


@pytest.mark.parametrize(
    ("text", "ms"),
    [
        ("1767225600000", 1_767_225_600_000),
        ("2026-01-01T00:00:00Z", 1_767_225_600_000),
        ("2026-01-01T01:00:00+01:00", 1_767_225_600_000),
        ("2026-01-01", 1_767_225_600_000),  # no offset: UTC
    ],
)
def test_since_takes_epoch_milliseconds_or_iso_8601(text: str, ms: int) -> None:
    assert parse_since(text) == ms


def test_since_refuses_anything_else() -> None:
    with pytest.raises(argparse.ArgumentTypeError, match="not epoch milliseconds nor an ISO-8601 time: 'yesterday'"):
        parse_since("yesterday")


def test_progress_lines_carry_the_time_since_start() -> None:
    ticks = iter([100.0, 101.25, 172.5])
    stream = io.StringIO()
    progress = Progress(stream, clock=lambda: next(ticks))

    progress.say("reading journal")
    progress.say("read 1,000 events")

    assert stream.getvalue() == "berth-analyze [   1.2 s] reading journal\nberth-analyze [  72.5 s] read 1,000 events\n"


def test_version_and_help_answer_without_spark_every_flag_explained_with_its_default(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from berth.pipeline.arguments import analyze_parser, convert_parser, version

    with pytest.raises(SystemExit) as exit_info:
        analyze_parser().parse_args(["--version"])
    assert exit_info.value.code == 0
    assert capsys.readouterr().out == f"berth-analyze {version()}\n"
    for parser in (analyze_parser(), convert_parser()):
        for action in parser._actions:
            assert action.help, action.option_strings
        text = parser.format_help()
        assert "`" not in text  # plain text, no reST markup
    analyze_help = " ".join(analyze_parser().format_help().split())
    for shown in ("(default: 0.99)", "(default: 1.5)", "(default: 3000)", "(default: 6000)", "(default: auto)"):
        assert shown in analyze_help, shown


def test_a_closed_stdout_or_stderr_ends_the_command_quietly(tmp_path: Path) -> None:
    for args, stream in ((["--help"], "stdout"), (["--journal", str(tmp_path / "none"), "--out", "x"], "stderr")):
        read_end, write_end = os.pipe()
        os.close(read_end)  # the reader is gone before anything is written, as after `| head -1`
        streams = {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE, stream: write_end}
        result = subprocess.run([sys.executable, "-m", "berth.pipeline.main", *args], check=False, **streams)
        os.close(write_end)
        other = result.stderr if stream == "stdout" else result.stdout
        assert b"Traceback" not in (other or b""), other
        assert b"BrokenPipeError" not in (other or b""), other


def test_journal_url_with_a_cluster_master_needs_a_shared_staging_dir(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from berth.pipeline.main import main

    monkeypatch.delenv("PYSPARK_GATEWAY_PORT", raising=False)
    args = ["--journal-url", "http://127.0.0.1:9", "--out", str(tmp_path / "out"), "--quiet"]

    assert main([*args, "--master", "spark://spark-master:7077"]) == 1
    assert capsys.readouterr().err == (
        "berth-analyze: error: --journal-url with the cluster master spark://spark-master:7077 needs --staging-dir: "
        "a folder on storage every executor reads (a shared volume), where the journal is downloaded before the "
        "executors read it\n"
    )
    # With a staging folder it gets as far as the download (this coordinator does not exist), leaving nothing there.
    staging = tmp_path / "shared"
    assert main([*args, "--master", "spark://spark-master:7077", "--staging-dir", str(staging)]) == 1
    assert "coordinator unreachable" in capsys.readouterr().err
    assert list(staging.iterdir()) == []


@pytest.mark.parametrize(
    ("master", "local"),
    [
        ("local", True),
        ("local[2]", True),
        ("local[*]", True),
        ("local-cluster[2,1,1024]", True),
        ("spark://127.0.0.1:7077", False),
        ("k8s://https://kubernetes.default:443", False),
        ("yarn", False),
    ],
)
def test_only_local_masters_share_the_drivers_disk(master: str, local: bool) -> None:
    from berth.pipeline.sources import is_local_master

    assert is_local_master(master) is local


def test_sql_settings_are_sized_to_the_journal_unless_the_sessions_configuration_names_them(
    spark: SparkSession,
) -> None:
    # The tests' session names the shuffle partitions (2) and adaptive execution (off), as spark-submit's --conf
    # would; whole-stage code generation is left to the sizing, and put back afterwards for the other tests.
    key = "spark.sql.codegen.wholeStage"
    before = spark.conf.get(key), spark.conf.get(CODEGEN_FACTORY_MODE)
    try:
        assert size_sql(spark, 70_000) == SqlSizing(partitions=2, cores=2, adaptive=False, codegen=False)
        assert spark.conf.get(key) == "false"
        assert spark.conf.get(CODEGEN_FACTORY_MODE) == "NO_CODEGEN"  # expressions interpreted too
        assert size_sql(spark, SMALL_JOURNAL_BYTES).codegen
        assert spark.conf.get(key) == "true"
        assert spark.conf.get(CODEGEN_FACTORY_MODE) == "FALLBACK"
    finally:
        spark.conf.set(key, before[0] or "true")
        spark.conf.set(CODEGEN_FACTORY_MODE, before[1] or "FALLBACK")
