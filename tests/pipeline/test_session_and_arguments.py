"""Who decides the master (spark-submit, always, when it launched us), ``--since`` parsing, and progress lines."""

from __future__ import annotations

import argparse
import io

import pytest

from berth.pipeline.arguments import parse_since
from berth.pipeline.progress import Progress
from berth.pipeline.session import local_settings


def test_outside_spark_submit_the_local_default_or_the_given_master_applies(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PYSPARK_GATEWAY_PORT", raising=False)

    assert local_settings(None, "4g")["spark.master"] == "local[*]"
    assert local_settings("local[2]", "2g")["spark.master"] == "local[2]"
    assert local_settings("local[2]", "2g")["spark.driver.memory"] == "2g"


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
