"""``berth-coordinator`` configured by its environment alone, logging JSON (the convention both daemons share,
docs/api.md §10): every flag as ``BERTH_<FLAG>``, the flag winning, a bad value one line and exit 2."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

pytestmark = pytest.mark.timeout(120)

COMMAND = [sys.executable, "-m", "berth.coordinator.command.main"]


def test_the_environment_configures_every_flag_and_the_logs_are_json(tmp_path: Path) -> None:
    environ = {
        **os.environ,
        "BERTH_DATA_DIR": str(tmp_path / "data"),
        "BERTH_PORT": "0",
        "BERTH_GROUP_MIN_SESSION_TIMEOUT_MS": "7000",
        "BERTH_GROUP_MAX_SESSION_TIMEOUT_MS": "90000",
        "BERTH_LOG_FORMAT": "json",
    }
    # The flag beats its variable: the maximum is the command line's.
    process = subprocess.Popen(
        [*COMMAND, "--group-max-session-timeout-ms", "120000"],
        env=environ,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        url = process.stdout.readline().strip().removeprefix("listening on ")
        with urllib.request.urlopen(f"{url}/v1/config", timeout=10) as answer:
            config = json.loads(answer.read())
        assert (config["group_min_session_timeout_ms"], config["group_max_session_timeout_ms"]) == (7000, 120000)
    finally:
        process.send_signal(signal.SIGTERM)
        _, stderr = process.communicate(timeout=30)
    assert process.returncode == 0
    lines = [json.loads(line) for line in stderr.splitlines()]
    assert lines, "no log line"
    ready = next(line for line in lines if line["message"].startswith("ready: listening on"))
    assert ready["severity"] == "info" and ready["logger"] == "berth.coordinator"
    assert {"timestamp", "severity", "logger", "message"} <= set(ready)


def test_a_variable_its_flag_would_refuse_is_one_line_and_exit_2(tmp_path: Path) -> None:
    environ = {**os.environ, "BERTH_DATA_DIR": str(tmp_path / "data"), "BERTH_MAX_BODY_BYTES": "lots"}
    result = subprocess.run(COMMAND, env=environ, capture_output=True, text=True, timeout=60, check=False)
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr == "berth-coordinator: error: BERTH_MAX_BODY_BYTES: invalid value 'lots'\n"
