"""``CoordinatorProcess``: a ``berth-coordinator`` process on this machine, for demos, tests and benchmarks.

It runs the command as a user would (a subprocess of this Python, never an import of the server), on a data
directory and a free port (``--port 0`` unless ``extra_args`` name one: the last flag wins), and finds its URL in
the ready line it prints once ``/readyz`` answers (http or https; with ``--probe-port``, the probe listener's URL
goes to ``probe_url``). ``stop()`` sends SIGTERM and returns the exit status, ``kill()`` sends SIGKILL (crash
tests), ``restart()`` starts it again on the same data directory. Its stderr is appended to
``<data_dir>.stderr.log``. ``cpu`` pins it to one core with ``taskset`` where that exists.

With ``etcd`` (an ``EtcdTarget``) it is a replica on etcd instead (``--etcd-endpoints``, no data dir: ``data_dir``
only names its log): ``start()`` returns once it listens, as a standby (``standby on URL``) or already active;
``active`` says which it was last seen to be. ``freeze()`` and ``thaw()`` send SIGSTOP and SIGCONT.

``prefix`` is a command the process starts under (a network namespace of a test's lab: ``nsenter --net=...``, which
execs it, so ``pid`` is the coordinator's own), ``env`` variables added to this process's environment for it
(``BERTH_FAILPOINTS`` in the robustness runs); ``start(env=...)`` adds more for that start only.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

READY_LINE = re.compile(r"^listening on (https?://\S+)$")
STANDBY_LINE = re.compile(r"^standby on (https?://\S+)$")
PROBES_LINE = re.compile(r"^probes on (http://\S+)$")


@dataclass(frozen=True)
class EtcdTarget:
    """Where a replica keeps its state: etcd's endpoints (comma-separated), the prefix, and its own name."""

    endpoints: str
    prefix: str
    name: str
    lease_ttl_s: int = 5


class CoordinatorProcess:
    def __init__(
        self,
        data_dir: Path,
        *extra_args: str,
        manual_clock: bool = False,
        cpu: int | None = None,
        etcd: EtcdTarget | None = None,
        prefix: Sequence[str] = (),
        env: Mapping[str, str] | None = None,
    ) -> None:
        self.data_dir = data_dir
        self.prefix = list(prefix)
        self.env = dict(env or {})
        self.etcd = etcd
        self.active = False
        self.extra_args = list(extra_args)
        self.manual_clock = manual_clock
        self.cpu = cpu
        self.proc: subprocess.Popen[str] | None = None
        self.url = ""
        self.probe_url = ""  # with --probe-port: where /healthz, /readyz and /metrics are also served
        self.log_path = data_dir.parent / f"{data_dir.name}.stderr.log"

    @property
    def args(self) -> list[str]:
        args = [sys.executable, "-m", "berth.coordinator.http.main", "--port", "0"]
        if self.etcd is None:
            args += ["--data-dir", str(self.data_dir)]
        else:
            args += [
                *("--etcd-endpoints", self.etcd.endpoints, "--etcd-prefix", self.etcd.prefix),
                *("--replica-name", self.etcd.name, "--etcd-lease-ttl-s", str(self.etcd.lease_ttl_s)),
            ]
        if self.manual_clock:
            args.append("--manual-clock")
        args += self.extra_args
        if self.cpu is not None and shutil.which("taskset") and self.cpu < (os.cpu_count() or 1):
            args = ["taskset", "-c", str(self.cpu), *args]
        return [*self.prefix, *args]

    @property
    def pid(self) -> int:
        assert self.proc is not None, "not running"
        return self.proc.pid

    def start(self, timeout: float = 60.0, env: Mapping[str, str] | None = None) -> CoordinatorProcess:
        if self.etcd is None:
            self.data_dir.mkdir(parents=True, exist_ok=True)
        else:
            self.data_dir.parent.mkdir(parents=True, exist_ok=True)
        self.active = False
        with open(self.log_path, "a") as log:
            environment = {**os.environ, **self.env, **(env or {}), "PYTHONUNBUFFERED": "1"}
            self.proc = subprocess.Popen(self.args, stdout=subprocess.PIPE, stderr=log, text=True, env=environment)
        assert self.proc.stdout is not None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            line = self.proc.stdout.readline()
            if not line:
                break
            probes = PROBES_LINE.match(line.strip())
            if probes:
                self.probe_url = probes.group(1)
            match = READY_LINE.match(line.strip())
            if match:
                self.url = match.group(1)
                self.active = True
                return self
            standby = STANDBY_LINE.match(line.strip())
            if standby:
                self.url = standby.group(1)
                return self
        try:
            code: int | None = self.proc.wait(10)  # stdout closed: the process is exiting
        except subprocess.TimeoutExpired:
            code = None
        raise RuntimeError(f"berth-coordinator did not become ready (exit {code}); stderr:\n{self.stderr()}")

    def stderr(self) -> str:
        """The tail of the process's stderr log."""
        try:
            return self.log_path.read_text()[-8000:]
        except OSError:
            return ""

    def rss_bytes(self) -> int:
        for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
        return 0

    def stop(self, timeout: float = 20.0) -> int:
        """SIGTERM and wait (SIGKILL if it will not stop); returns the exit status."""
        if self.proc is None:
            return 0
        self.proc.send_signal(signal.SIGTERM)
        try:
            code = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            code = self.proc.wait()
        finally:
            self._close()
        return code

    def kill(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait(10)
            self._close()

    def freeze(self) -> None:
        """SIGSTOP: the process stops running (as a long GC pause or a frozen VM would)."""
        assert self.proc is not None, "not running"
        self.proc.send_signal(signal.SIGSTOP)

    def thaw(self) -> None:
        assert self.proc is not None, "not running"
        self.proc.send_signal(signal.SIGCONT)

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

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

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.stop()
