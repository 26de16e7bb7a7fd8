"""The real ``berth-operator`` command as a process, for the control-plane tier.

It runs with a kubeconfig holding a ServiceAccount token (``kubectl create token``), so it can do exactly what the
chart grants and nothing more; its output goes to a file the tests read (``log``), and ``forbidden()`` lists every
line where the API server refused it something. Each process has a name of its own (``POD_NAME``, as the chart
sets it), which its requests carry in their User-Agent: :meth:`requests` picks them out of the API server's audit
log. :meth:`signal` sends it a signal (SIGKILL, SIGSTOP, SIGCONT) to play a crash or a freeze. ``prefix`` runs it
through another command (``support.netlab``'s ``nsenter`` into a host of a private network), which must ``exec`` it:
the process started is the operator itself.
"""

from __future__ import annotations

import itertools
import os
import signal
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from support.kube import wait_until

COMMAND = [str(Path(sys.executable).parent / "berth-operator")]
_names = itertools.count(1)


class OperatorProcess:
    def __init__(
        self,
        kubeconfig: Path,
        log_path: Path,
        args: Sequence[str],
        env: dict[str, str] | None = None,
        prefix: Sequence[str] = (),
    ) -> None:
        self.prefix = list(prefix)
        self.kubeconfig = kubeconfig
        self.log_path = log_path
        self.args = list(args)
        self.env = env or {}
        self.process: subprocess.Popen[bytes] | None = None
        self.metrics_url = ""  # set by whoever gave it a --metrics-port
        self.name = self.env.get("POD_NAME") or f"test-operator-{os.getpid()}-{next(_names)}"
        self.env["POD_NAME"] = self.name

    def start(self, *, wait: bool = True) -> OperatorProcess:
        output = self.log_path.open("ab")
        environment = {**os.environ, "KUBECONFIG": str(self.kubeconfig), **self.env}
        environment.pop("BERTH_TOKEN", None)
        self.process = subprocess.Popen(
            [*self.prefix, *COMMAND, *self.args],
            stdout=output,
            stderr=subprocess.STDOUT,
            env=environment,
            start_new_session=True,
        )
        output.close()
        if wait:
            self.wait_started()
        return self

    def wait_started(self) -> None:
        """Until it logged that it watches fleets (a standby does too); it must not have exited meanwhile."""
        assert self.process is not None
        wait_until(
            lambda: "watching ConsumerFleets" in self.log() or self.process is None or self.process.poll() is not None,
            "the operator to start",
        )
        assert self.process.poll() is None, f"berth-operator exited at start:\n{self.log()}"

    def requests(self, events: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Of an audit log's events, this process's requests (its User-Agent names it; with --leader-elect its
        replica name is the pod name and a suffix)."""
        return [
            e
            for e in events
            if f"({self.name})" in e.get("userAgent", "") or f"({self.name}_" in e.get("userAgent", "")
        ]

    def signal(self, sig: signal.Signals) -> None:
        assert self.process is not None
        os.killpg(self.process.pid, sig)

    def wait(self, timeout_s: float) -> int:
        assert self.process is not None
        return self.process.wait(timeout=timeout_s)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def forbidden(self) -> list[str]:
        return [line for line in self.log().splitlines() if "forbidden" in line.lower()]

    def stop(self) -> int:
        if self.process is None or self.process.poll() is not None:
            return self.process.returncode if self.process else 0
        os.killpg(self.process.pid, signal.SIGCONT)  # a frozen process would not hear SIGTERM
        os.killpg(self.process.pid, signal.SIGTERM)
        try:
            return self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            return self.process.wait()
