"""What a command costs as a whole: wall time, CPU-seconds and peak memory of its entire process tree.

Owns the measurement of a benchmarked command run as a user runs it. Rules:
- CPU is user + system time of every process the command starts, grandchildren included: ``berth-analyze`` is a
  Python driver whose JVM may outlive it by a moment, and a JVM the driver never waits for would escape
  ``RUSAGE_CHILDREN``. So this process becomes a *child subreaper* (Linux ``PR_SET_CHILD_SUBREAPER``): orphans of
  the command are re-parented here, and reaped here, so their CPU is counted. CPU-seconds barely move with the
  machine's other load; wall time does, which is why both are reported.
- Peak memory is the largest sum of resident set sizes over the command's process tree, sampled every
  ``SAMPLE_S``: what a container's memory limit would have to hold (shared pages counted in each process, so it
  errs high). A spike shorter than the sampling period can be missed.
- The caller has no other children while a command is measured (every descendant of this process counts).
"""

from __future__ import annotations

import ctypes
import os
import resource
import subprocess
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

SAMPLE_S = 0.1
_PR_SET_CHILD_SUBREAPER = 36
_PAGE = os.sysconf("SC_PAGE_SIZE")


@dataclass(frozen=True)
class Cost:
    wall_s: float
    cpu_s: float
    peak_rss_bytes: int

    @property
    def peak_rss_mib(self) -> float:
        return self.peak_rss_bytes / 2**20


def become_subreaper() -> bool:
    """Make orphaned descendants of this process its children (Linux only); whether that worked."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return int(libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)) == 0
    except (OSError, AttributeError):
        return False


def measure(
    command: Sequence[str], *, env: Mapping[str, str] | None = None, cwd: str | Path | None = None, timeout_s: float
) -> tuple[Cost, subprocess.CompletedProcess[bytes]]:
    """Run ``command`` to completion (output captured) and return what its process tree cost."""
    if not become_subreaper():
        raise RuntimeError("cannot become a child subreaper: CPU of orphaned processes would be lost")
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    peak = _PeakRss(os.getpid())
    started = time.monotonic()
    peak.start()
    try:
        result = subprocess.run(
            list(command), env=None if env is None else dict(env), cwd=cwd, capture_output=True, timeout=timeout_s
        )
    finally:
        _reap_orphans()
        wall = time.monotonic() - started
        peak.stop()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return Cost(wall_s=wall, cpu_s=cpu, peak_rss_bytes=peak.value), result


def _reap_orphans() -> None:
    """Wait for every remaining descendant (re-parented here) so that its CPU time is counted."""
    while True:
        try:
            os.waitpid(-1, 0)
        except ChildProcessError:
            return


class _PeakRss(threading.Thread):
    """Samples the summed RSS of every descendant of ``root`` until stopped; ``value`` is the largest sum."""

    def __init__(self, root: int) -> None:
        super().__init__(daemon=True)
        self.root = root
        self.value = 0
        self._done = threading.Event()

    def run(self) -> None:
        while not self._done.wait(SAMPLE_S):
            self.value = max(self.value, _tree_rss(self.root))

    def stop(self) -> None:
        self._done.set()
        self.join()


def _tree_rss(root: int) -> int:
    children: dict[int, list[int]] = {}
    rss: dict[int, int] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            stat = Path(entry.path, "stat").read_text()
            pages = int(Path(entry.path, "statm").read_text().split()[1])
        except (OSError, ValueError, IndexError):
            continue  # gone meanwhile
        fields = stat.rsplit(")", 1)[1].split()
        pid = int(entry.name)
        children.setdefault(int(fields[1]), []).append(pid)
        rss[pid] = pages * _PAGE
    total, stack = 0, list(children.get(root, []))
    while stack:
        pid = stack.pop()
        total += rss.get(pid, 0)
        stack.extend(children.get(pid, []))
    return total
