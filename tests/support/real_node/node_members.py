"""What a fleet of example consumers (``python -m berth.coordinator.client.example``) says in its pods' logs.

The example prints ``<instance> committed <topic>[<p>]=<offset> ...`` only after the coordinator acknowledged the
commit (the member library's ``commit()`` returned), and its positions only grow while the group does not
rebalance, so the logs are a ledger of acknowledged commits, timed by the kubelet's log timestamps (this machine's
clock, as ``time.time()``):

- :func:`read_logs` the pods' logs with timestamps; :func:`commits` the acknowledged commits in them;
- :func:`acknowledged_before` the last offset acknowledged per partition before a moment: a committed offset read
  from the coordinator afterwards must not be below it (a lower one is an acknowledged commit lost);
- :func:`surfaced` every line that is neither a commit nor the first assignment: a refused commit, a revocation
  (a rebalance), a retry the library logged as a warning, a fatal error, a traceback; what the member's user sees.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime

from support.node_stage import FleetStage

COMMITTED = re.compile(r"^(\S+) committed (.+)$")
OFFSET = re.compile(r"(\S+)\[(\d+)\]=(\d+)")
ASSIGNED = re.compile(r"^\S+ generation \d+( \(leader\))? owns ")


@dataclass(frozen=True)
class Commit:
    at: float
    pod: str
    offsets: dict[tuple[str, int], int]


def read_logs(
    stage: FleetStage, replicas: int, *, skip: frozenset[str] = frozenset()
) -> dict[str, list[tuple[float, str]]]:
    """Each pod's log lines (stdout and stderr) as (time.time() of the line, text); ``skip``: pods whose logs cannot
    be read (on a lost node: the kubelet that serves them is gone)."""
    logs = {}
    for ordinal in range(replicas):
        pod = f"{stage.name}-{ordinal}"
        if pod in skip:
            continue
        text = stage.kubectl("logs", pod, "--timestamps")
        lines: list[tuple[float, str]] = []
        for line in text.splitlines():
            stamp, _, message = line.partition(" ")
            try:
                lines.append((_parse(stamp), message))
            except ValueError:  # not a line of the container's (the kubelet's own words): kept whole, surfaced
                lines.append((lines[-1][0] if lines else 0.0, line))
        logs[pod] = lines
    return logs


def _parse(stamp: str) -> float:
    """An RFC 3339 timestamp with up to nanoseconds (the kubelet's) as seconds since the epoch."""
    head, _, fraction = stamp.rstrip("Z").partition(".")
    whole = datetime.fromisoformat(head + "+00:00").timestamp()
    return whole + (float(f"0.{fraction}") if fraction else 0.0)


def commits(logs: dict[str, list[tuple[float, str]]]) -> list[Commit]:
    found = []
    for pod, lines in logs.items():
        for at, message in lines:
            if match := COMMITTED.match(message):
                offsets = {(t, int(p)): int(o) for t, p, o in OFFSET.findall(match.group(2))}
                found.append(Commit(at, pod, offsets))
    return sorted(found, key=lambda commit: commit.at)


def acknowledged_before(found: list[Commit], moment: float) -> dict[tuple[str, int], int]:
    last: dict[tuple[str, int], int] = {}
    for commit in found:
        if commit.at < moment:
            for partition, offset in commit.offsets.items():
                last[partition] = max(last.get(partition, -1), offset)
    return last


def lost(acknowledged: dict[tuple[str, int], int], committed: dict[tuple[str, int], int]) -> dict[str, str]:
    """Partitions whose committed offset is below one acknowledged earlier: ``{"t[p]": "acked A, committed C"}``."""
    return {
        f"{t}[{p}]": f"acknowledged {offset}, committed {committed.get((t, p))}"
        for (t, p), offset in acknowledged.items()
        if committed.get((t, p), -1) < offset
    }


def surfaced(logs: dict[str, list[tuple[float, str]]], since: float = 0.0) -> list[str]:
    """Lines after ``since`` that are neither a commit nor the pod's first assignment (see the module docstring)."""
    found = []
    for pod, lines in logs.items():
        first_assignment = next((i for i, (_, message) in enumerate(lines) if ASSIGNED.match(message)), None)
        found += [
            f"{pod}: {message}"
            for i, (at, message) in enumerate(lines)
            if at >= since and message.strip() and not COMMITTED.match(message) and i != first_assignment
        ]
    return found
