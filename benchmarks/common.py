"""Shared benchmark plumbing: coordinator processes (optionally pinned to a core), statistics, results files.

Benchmarks never import the test suite: they start ``berth-coordinator`` the way a user would.
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import statistics
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from berth.operator.local.coordinator_process import CoordinatorProcess

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"


def machine() -> dict[str, Any]:
    model = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {
        "cpu": model,
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        "platform": platform.platform(terse=True),
        "date": time.strftime("%Y-%m-%d"),
    }


def spread(samples: Sequence[float]) -> dict[str, float]:
    """Median with min and max: the figure every benchmark reports."""
    return {
        "median": statistics.median(samples),
        "min": min(samples),
        "max": max(samples),
        "runs": len(samples),
    }


def cpu_seconds(pid: int) -> float:
    """CPU time (user + system) a process has used so far: per-request cost that contention barely skews."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = int(fields[11]) + int(fields[12])
    return ticks / os.sysconf("SC_CLK_TCK")


def pinned(args: list[str], cpu: int | None) -> list[str]:
    """Prefix a command with ``taskset`` so it runs on one core (when the machine has taskset and the core)."""
    if cpu is None or shutil.which("taskset") is None or (os.cpu_count() or 1) <= cpu:
        return args
    return ["taskset", "-c", str(cpu), *args]


class Coordinator(CoordinatorProcess):
    """A coordinator for a benchmark: system clock, warnings-only log, optionally pinned to a core."""

    def __init__(self, data_dir: Path, *extra: str, cpu: int | None = None, manual_clock: bool = False) -> None:
        super().__init__(data_dir, "--log-level", "warning", *extra, manual_clock=manual_clock, cpu=cpu)

    def peak_rss_bytes(self) -> int:
        """The most memory the process held since it started (the kernel's high-water mark, VmHWM)."""
        for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
        return 0


@dataclass
class Result:
    """One benchmark's published figures (``benchmarks/results/<name>.json``)."""

    name: str
    title: str
    command: str
    goal: str
    met: bool | None
    summary: str
    figures: dict[str, Any] = field(default_factory=dict)
    note: str = ""
    machine: dict[str, Any] = field(default_factory=machine)

    def save(self) -> Path:
        RESULTS.mkdir(parents=True, exist_ok=True)
        path = RESULTS / f"{self.name}.json"
        path.write_text(json.dumps(asdict(self), indent=2, sort_keys=True) + "\n")
        return path


def progress(message: str) -> None:
    print(f"[bench] {message}", file=sys.stderr, flush=True)
