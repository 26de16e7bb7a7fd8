"""``berth-operator`` as a process: one-line errors with exit status 2, and a real run against the emulator with
JSON logs, a liveness endpoint, a token that never shows up in a log line, and a clean stop on SIGTERM."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import warnings
from pathlib import Path

import aiohttp
import pytest
from kopf_apiserver import ApiServer
from kopf_harness import create_fleet, fleet_body, statefulset, until, until_async
from support.coordinator import CoordinatorProcess
from support.net import free_port

from berth.operator.main import main

COMMAND = [sys.executable, "-m", "berth.operator.main"]
SECRET = "s3cr3t-admin-token-value"
NEWLINE = chr(10)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--log-format", "xml"], "argument --log-format: invalid choice: 'xml'"),
        (["--session-min-ms", "500"], "--session-min-ms: 500 is outside 1000..1800000"),
        (["--session-min-ms", "6e4"], "argument --session-min-ms: invalid int value: '6e4'"),
        (["--session-min-ms", "60000", "--session-max-ms", "30000"], "--session-min-ms 60000 is above"),
        (["--coordinator-url", "ftp://x"], "--coordinator-url: 'ftp://x': the scheme must be http or https"),
        (
            ["--trusted-coordinator", "http://h:9094/internal?x"],
            "--trusted-coordinator: 'http://h:9094/internal?x': a coordinator URL is scheme://host:port",
        ),
        (["--token-file", "/nonexistent/token"], "--token-file: cannot read /nonexistent/token"),
        (["--reconcile-interval-s", "0"], "--reconcile-interval-s: 0.0 is below 0.1"),
        (["--liveness-port", "70000"], "--liveness-port: 70000 is not a port number"),
    ],
)
def test_bad_flags_are_one_line_and_exit_2(args: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(args) == 2
    stderr = capsys.readouterr().err
    assert stderr.count(NEWLINE) == 1, stderr
    assert stderr.startswith("berth-operator: error: ") and message in stderr


def test_no_kubernetes_credentials_is_one_line_and_exit_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "missing"))
    assert main(["--namespace", "shop"]) == 2
    stderr = capsys.readouterr().err
    assert stderr.count(NEWLINE) == 1 and "no Kubernetes credentials" in stderr


def test_the_console_script_exits_2_on_an_unknown_flag() -> None:
    result = subprocess.run([*COMMAND, "--bogus"], capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 2
    assert result.stderr == "berth-operator: error: unrecognized arguments: --bogus" + NEWLINE


@pytest.mark.parametrize(
    ("flag", "other"), [("--metrics-port", "--liveness-port"), ("--liveness-port", "--metrics-port")]
)
def test_a_port_another_operator_holds_is_one_line_and_exit_2(kubeconfig: Path, flag: str, other: str) -> None:
    with socket.socket() as taken:  # a second operator on the node: the first one listens there
        taken.bind(("0.0.0.0", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = subprocess.run(
            [*COMMAND, "--namespace", "shop", flag, str(port), other, "0"],
            env={**os.environ, "KUBECONFIG": str(kubeconfig)},
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr == (
        f"berth-operator: error: {flag} {port}: cannot listen on port {port} (Address already in use): another"
        " operator on this node? give this one other ports (0 turns an endpoint off)" + NEWLINE
    )


async def _healthy(session: aiohttp.ClientSession, url: str) -> bool:
    try:
        async with session.get(url) as response:
            # Closed after each answer: a kept-alive connection would hold the operator's stop (Kopf waits for it).
            assert response.headers.get("Connection") == "close"
            return response.status == 200
    except aiohttp.ClientError:
        return False


async def _stopped_by_sigterm(process: asyncio.subprocess.Process, log: Path) -> int:
    """SIGTERM, then the exit status; a process still running 60 s later (a busy machine) is killed and the test fails
    with the end of its log (what it was waiting for)."""
    process.send_signal(signal.SIGTERM)
    try:
        return await asyncio.wait_for(process.wait(), 60)
    except TimeoutError:
        process.kill()
        await process.wait()
        tail = NEWLINE.join((await asyncio.to_thread(log.read_text)).splitlines()[-40:])
        pytest.fail(f"berth-operator did not exit within 60 s of SIGTERM; its log ends:{NEWLINE}{tail}")


async def test_the_command_runs_with_json_logs_liveness_and_stops_on_sigterm(
    apiserver: ApiServer,
    kubeconfig: Path,
    coordinator: CoordinatorProcess,
    session: aiohttp.ClientSession,
    tmp_path: Path,
) -> None:
    token_file = tmp_path / "token"
    token_file.write_text(SECRET + "\n")
    port = free_port()
    log = tmp_path / "operator.log"
    with log.open("w") as output:
        # The coordinator here has no tokens file, so it ignores the token; the point is that none of it is logged.
        process = await asyncio.create_subprocess_exec(
            *COMMAND,
            *("--namespace", "shop", "--coordinator-url", coordinator.url, "--token-file", str(token_file)),
            *(
                "--liveness-port",
                str(port),
                "--metrics-port",
                "0",
                "--log-format",
                "json",
                "--reconcile-interval-s",
                "0.5",
            ),
            stdout=output,
            stderr=subprocess.STDOUT,
            env={**os.environ, "KUBECONFIG": str(kubeconfig)},
        )
        try:
            await until_async(lambda: _healthy(session, f"http://127.0.0.1:{port}/healthz"), "/healthz", 60)
            await create_fleet(apiserver, fleet_body("orders", 1))
            await until(lambda: (s := statefulset(apiserver, "orders")) and s["spec"]["replicas"] == 1, "size 1")
        finally:
            code = await _stopped_by_sigterm(process, log)
    assert code == 0
    lines = [json.loads(line) for line in log.read_text().splitlines() if line.startswith("{")]
    text = "\n".join(line["message"] for line in lines)
    assert "SIGTERM received: stopping" in text
    # A wind-down cut short after UNGATED_WIND_DOWN_S still exits 0, saying what it waited on: shown, for its cause.
    for line in lines:
        if line["message"].startswith("the operator did not wind down"):
            warnings.warn(line["message"], stacklevel=1)
    assert "watching ConsumerFleets (consumerfleets.berth.dev/v1alpha1) in namespace shop" in text
    assert f"default coordinator: {coordinator.url}" in text
    assert f"coordinator admin token: from file {token_file}" in text
    assert "Created: created StatefulSet orders" in text
    created = next(line for line in lines if line["message"].startswith("Created: created StatefulSet"))
    assert created["object"]["name"] == "orders" and created["severity"] == "info"
    assert SECRET not in log.read_text()


@pytest.mark.parametrize(("command", "build"), [("berth-operator", "options"), ("berth-demo", "demo")])
def test_version_and_help_with_a_text_and_default_for_every_flag(command: str, build: str) -> None:
    from berth.operator.command.options import build_parser as operator_parser
    from berth.operator.local.demo import build_parser as demo_parser

    version = subprocess.run([str(Path(sys.executable).parent / command), "--version"], capture_output=True, text=True)
    assert version.returncode == 0 and version.stdout.startswith(f"{command} ")
    parser = operator_parser() if build == "options" else demo_parser()
    for action in parser._actions:
        if action.option_strings and action.dest not in ("help", "version"):
            assert action.help, f"{command} {action.option_strings[0]} has no help text"
    text = parser.format_help()
    assert "``" not in text, "reST markup in --help"
    assert "(default: 10000)" in text if build == "demo" else "(default: 6000)" in text


def test_a_closed_pipe_ends_the_command_quietly() -> None:
    from berth.operator.command.cli import EXIT_CLOSED_PIPE, quiet_on_closed_pipe

    def writes_into_a_closed_pipe() -> int:
        raise BrokenPipeError

    saved = os.dup(sys.stdout.fileno())  # the helper points stdout at /dev/null: give the test its own back
    try:
        assert quiet_on_closed_pipe(writes_into_a_closed_pipe) == EXIT_CLOSED_PIPE
    finally:
        os.dup2(saved, sys.stdout.fileno())
        os.close(saved)
