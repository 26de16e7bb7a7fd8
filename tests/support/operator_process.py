"""The real ``berth-operator`` command as a process, for the control-plane tier.

It runs with a kubeconfig holding a ServiceAccount token (``kubectl create token``), so it can do exactly what the
chart grants and nothing more; its output goes to a file the tests read (``log``), and ``forbidden()`` lists every
line where the API server refused it something.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from support.kube import wait_until

COMMAND = [str(Path(sys.executable).parent / "berth-operator")]


class OperatorProcess:
    def __init__(
        self, kubeconfig: Path, log_path: Path, args: Sequence[str], env: dict[str, str] | None = None
    ) -> None:
        self.kubeconfig = kubeconfig
        self.log_path = log_path
        self.args = list(args)
        self.env = env or {}
        self.process: subprocess.Popen[bytes] | None = None
        self.metrics_url = ""  # set by whoever gave it a --metrics-port

    def start(self) -> OperatorProcess:
        output = self.log_path.open("ab")
        environment = {**os.environ, "KUBECONFIG": str(self.kubeconfig), **self.env}
        environment.pop("BERTH_TOKEN", None)
        self.process = subprocess.Popen(
            [*COMMAND, *self.args], stdout=output, stderr=subprocess.STDOUT, env=environment, start_new_session=True
        )
        output.close()
        wait_until(
            lambda: "watching ConsumerFleets" in self.log() or self.process is None or self.process.poll() is not None,
            "the operator to start",
        )
        assert self.process.poll() is None, f"berth-operator exited at start:\n{self.log()}"
        return self

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def forbidden(self) -> list[str]:
        return [line for line in self.log().splitlines() if "forbidden" in line.lower()]

    def stop(self) -> int:
        if self.process is None or self.process.poll() is not None:
            return self.process.returncode if self.process else 0
        os.killpg(self.process.pid, signal.SIGTERM)
        try:
            return self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            return self.process.wait()
