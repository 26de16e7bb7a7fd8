"""A real ``berth-coordinator`` process on 127.0.0.1 for end-to-end tests.

Started with ``--port 0`` (and ``--manual-clock`` by default); its URL comes from the ready line it prints.
``stop()`` sends SIGTERM, ``kill()`` SIGKILL (the crash tests), ``restart()`` starts it again on the same
data directory. Its stderr goes to a log file next to the data directory, shown when a test fails.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

READY_LINE = re.compile(r"^listening on (http://\S+)$")


class CoordinatorProcess:
    def __init__(self, data_dir: Path, *extra_args: str, manual_clock: bool = True) -> None:
        self.data_dir = data_dir
        self.extra_args = list(extra_args)
        self.manual_clock = manual_clock
        self.proc: subprocess.Popen[str] | None = None
        self.url = ""
        self.log_path = data_dir.parent / f"{data_dir.name}.stderr.log"

    @property
    def args(self) -> list[str]:
        args = [sys.executable, "-m", "berth.coordinator.http.main", "--data-dir", str(self.data_dir), "--port", "0"]
        if self.manual_clock:
            args.append("--manual-clock")
        return args + self.extra_args

    def start(self, timeout: float = 30.0) -> CoordinatorProcess:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        log = open(self.log_path, "a")  # noqa: SIM115 - closed with the process
        self.proc = subprocess.Popen(
            self.args, stdout=subprocess.PIPE, stderr=log, text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"}
        )
        log.close()
        assert self.proc.stdout is not None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            line = self.proc.stdout.readline()
            if not line:
                break
            match = READY_LINE.match(line.strip())
            if match:
                self.url = match.group(1)
                return self
        try:
            code: int | None = self.proc.wait(10)  # stdout closed: the process is exiting
        except subprocess.TimeoutExpired:
            code = None
        raise RuntimeError(f"coordinator did not become ready (exit {code}); stderr:\n{self.stderr()}")

    def stderr(self) -> str:
        try:
            return self.log_path.read_text()[-8000:]
        except OSError:
            return ""

    def stop(self, timeout: float = 20.0) -> int:
        """SIGTERM and wait; returns the exit status."""
        if self.proc is None:
            return 0
        self.proc.send_signal(signal.SIGTERM)
        try:
            code = self.proc.wait(timeout)
        finally:
            self._close()
        return code

    def kill(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait(10)
            self._close()

    def restart(self) -> CoordinatorProcess:
        if self.proc is not None and self.proc.poll() is None:
            self.stop()
        return self.start()

    def _close(self) -> None:
        if self.proc is not None and self.proc.stdout is not None:
            self.proc.stdout.close()
        self.proc = None

    def __enter__(self) -> CoordinatorProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.kill()
