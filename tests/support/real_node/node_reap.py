"""Ending a node's processes and removing what it made, for ``Node.stop()`` and for runs that died without it.

A node registers itself (:func:`register`) before it makes anything machine-global: a record
``/run/berth-node/<namespace>.json`` with its owner (the pid of the test run and that process's start time, so a
reused pid is not mistaken for it), its network namespace and host interface, its work directory and any directory
to remove with it. ``stop()`` ends the node and removes the record; a run killed with ``kill -9`` leaves the record
behind, with the node's processes still running.

A guard (:func:`start_guard`, ``python -m support.node_reap --guard <namespace>``, in a session of its own) watches
each node from the moment it is recorded: when the owner dies without ``stop()`` (a run killed, ``os._exit`` on a
timeout, SIGTERM), it reaps the node at once, so no pod's process outlives its run by more than a second; once
``stop()`` removed the record, it exits. :func:`reap_stale` (the node tier calls it when a session with node tests
starts) is the second line, for a guard killed with its run: it ends every recorded node whose owner is no longer
alive: processes in its network namespace (kubelet, containerd, kube-proxy, DNS), processes
whose command line names its work directory (the control plane, containerd's shims, an image build), its containers
through runc's state root (thawed first: a frozen process does not die of SIGKILL under cgroup v1's freezer), its
mounts, its namespace and interface, its pods' logs and its directories. A namespace named ``berth-node-<pid><4 hex>``
without a record (a run from before records) is reaped the same way when no live pid has that remainder (the name
keeps the pid modulo 100,000). A node whose owner
lives is never touched.

A cluster (support.node) records its fabric (with the cluster's directories to remove) and each node (its own
directory, nothing else): whichever record is reaped first ends the containers of every node under the directories
it removes, so none is left running without its runc state.

The helpers (:func:`remove_containers`, :func:`end_shims`, :func:`unmount_under`, :func:`remove_pod_logs`) are the
ones ``Node.stop()`` uses on its own node.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

RECORDS = Path("/run/berth-node")
NETNS_DIR = Path("/var/run/netns")
RUNC = Path("/usr/sbin/runc")
#: The namespaces' names: ``berth-node-`` then the owner's pid and four hex digits (support.node_network).
UNRECORDED = re.compile(r"^berth-node-(\d+)[0-9a-f]{4}$")


def run(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(argv), capture_output=True, text=True, check=False)


def start_time(pid: int) -> str | None:
    """The process's start time in clock ticks since boot (field 22 of /proc/PID/stat), None when it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()[19]


@dataclass(frozen=True)
class Record:
    netns: str
    host_if: str
    workdir: str
    owner: int
    owner_start: str
    remove: tuple[str, ...] = ()

    @property
    def path(self) -> Path:
        return RECORDS / f"{self.netns}.json"

    def owner_alive(self) -> bool:
        return start_time(self.owner) == self.owner_start


def register(netns: str, host_if: str, workdir: Path, remove: tuple[Path, ...] = ()) -> Record:
    """Record a node of this process (before its namespace exists)."""
    pid = os.getpid()
    started = start_time(pid)
    assert started is not None
    record = Record(netns, host_if, str(workdir), pid, started, tuple(str(p) for p in remove))
    RECORDS.mkdir(parents=True, exist_ok=True)
    partial = record.path.with_suffix(".partial")
    partial.write_text(json.dumps(asdict(record)))
    partial.rename(record.path)
    return record


def start_guard(netns: str) -> subprocess.Popen[bytes]:
    """The guard of the node recorded under ``netns`` (module docstring); it outlives this process on purpose."""
    return subprocess.Popen(
        [sys.executable, "-m", "support.node_reap", "--guard", netns],
        cwd=Path(__file__).resolve().parents[2],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )


def guard(netns: str, every_s: float = 1.0) -> None:
    """Until the record of ``netns`` is gone: reap the node once its owner is dead."""
    path = RECORDS / f"{netns}.json"
    while True:
        try:
            data = json.loads(path.read_text())
        except FileNotFoundError:
            return  # stopped (or reaped) by someone else
        except (OSError, ValueError):
            time.sleep(every_s)  # being written
            continue
        record = Record(**{**data, "remove": tuple(data.get("remove") or ())})
        if not record.owner_alive():
            reap(record)
            return
        time.sleep(every_s)


def unregister(netns: str) -> None:
    (RECORDS / f"{netns}.json").unlink(missing_ok=True)


def reap_stale() -> list[str]:
    """End every node whose owner is dead (see the module docstring); the namespaces reaped."""
    reaped = []
    recorded = set()
    for path in sorted(RECORDS.glob("*.json")) if RECORDS.is_dir() else []:
        try:
            data = json.loads(path.read_text())
            record = Record(**{**data, "remove": tuple(data.get("remove") or ())})
        except (OSError, ValueError, TypeError):
            continue
        recorded.add(record.netns)
        if not record.owner_alive():
            reap(record)
            reaped.append(record.netns)
    for netns in sorted(p.name for p in NETNS_DIR.glob("berth-node-*")) if NETNS_DIR.is_dir() else []:
        match = UNRECORDED.match(netns)
        if netns in recorded or match is None or _pid_may_live(int(match.group(1))):
            continue
        _kill(_in_netns(netns))
        run("ip", "netns", "delete", netns)
        reaped.append(netns)
    return reaped


def _pid_may_live(truncated: int) -> bool:
    """Whether a live process could own a namespace named after ``truncated`` (the owner's pid modulo 100,000,
    support.node_network): any live pid with that remainder counts, so a pid above 100,000 is never taken for dead."""
    return any(pid % 100_000 == truncated for pid in _pids())


def reap(record: Record) -> None:
    workdir = Path(record.workdir)
    kubelet_pods = workdir / "kubelet" / "pods"
    pod_uids = [p.name for p in kubelet_pods.iterdir()] if kubelet_pods.is_dir() else []
    _kill(_in_netns(record.netns) | _naming(workdir, *map(Path, record.remove)))
    # Every node's containers under the directories about to go (a cluster's nodes share one), whichever record
    # is reaped first: with their runc state removed, they could never be found again.
    for directory in (workdir, *map(Path, record.remove)):
        for node_dir in (directory, *_subdirectories(directory, depth=2)):
            remove_containers(node_dir / "runc")
            end_shims(node_dir / "containerd.sock")
    unmount_under(workdir)
    run("ip", "netns", "delete", record.netns)
    if record.host_if:
        run("ip", "link", "delete", record.host_if)
    remove_pod_logs(pod_uids)
    for directory in (workdir, *map(Path, record.remove)):
        shutil.rmtree(directory, ignore_errors=True)
    record.path.unlink(missing_ok=True)


# ------------------------------------------------------------------------------------------- the pieces


def _subdirectories(directory: Path, depth: int) -> list[Path]:
    if depth == 0 or not directory.is_dir():
        return []
    children = [child for child in directory.iterdir() if child.is_dir() and not child.is_symlink()]
    return children + [found for child in children for found in _subdirectories(child, depth - 1)]


def _pids() -> list[int]:
    return [int(entry.name) for entry in Path("/proc").iterdir() if entry.name.isdigit()]


def _in_netns(netns: str) -> set[int]:
    """Processes in the named network namespace."""
    try:
        inode = (NETNS_DIR / netns).stat().st_ino
    except OSError:
        return set()
    found = set()
    for pid in _pids():
        with contextlib.suppress(OSError):
            if os.stat(f"/proc/{pid}/ns/net").st_ino == inode:
                found.add(pid)
    return found


def _naming(*directories: Path) -> set[int]:
    """Processes whose command line names one of ``directories`` or a path under it."""
    markers = [str(d).encode() + end for d in directories for end in (b"/", b"\0")]
    found = set()
    for pid in _pids():
        with contextlib.suppress(OSError):
            argv = Path(f"/proc/{pid}/cmdline").read_bytes()
            if pid != os.getpid() and any(marker in argv for marker in markers):
                found.add(pid)
    return found


def _kill(pids: set[int]) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while any(start_time(pid) is not None and not _zombie(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.1)


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


def remove_containers(runc_root: Path) -> None:
    """Every container under runc's state root, paused ones thawed first (the shims would keep them running).

    containerd's runc shim keeps each containerd namespace's containers in a root of its own below the configured
    one (``<root>/k8s.io`` for the kubelet's): every such root is listed, and the configured one itself."""
    if not runc_root.is_dir():
        return
    for root in (runc_root, *(d for d in runc_root.iterdir() if d.is_dir() and not (d / "state.json").exists())):
        answer = run(str(RUNC), "--root", str(root), "list", "--format", "json")
        for container in json.loads(answer.stdout or "null") or []:
            if container.get("status") == "paused":
                run(str(RUNC), "--root", str(root), "resume", container["id"])
            run(str(RUNC), "--root", str(root), "delete", "--force", container["id"])


def end_shims(socket: Path) -> None:
    """The containerd shims a containerd on ``socket`` started (they outlive it): found by its address."""
    marker = str(socket).encode()
    for pid in _pids():
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if argv and b"containerd-shim" in argv[0] and marker in argv:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def unmount_under(directory: Path) -> None:
    prefix = str(directory) + "/"
    mounts = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        point = line.split()[4].replace("\\040", " ")
        if point.startswith(prefix):
            mounts.append(point)
    for point in sorted(set(mounts), key=len, reverse=True):
        run("umount", "-l", point)


def remove_pod_logs(uids: list[str]) -> None:
    """The kubelet keeps pod logs under /var/log/pods (not configurable in 1.28): remove these pods'."""
    pods = Path("/var/log/pods")
    for uid in uids:
        for directory in pods.glob(f"*_{uid}"):
            shutil.rmtree(directory, ignore_errors=True)
    containers = Path("/var/log/containers")
    if containers.is_dir():
        for link in containers.iterdir():
            if link.is_symlink() and not link.exists() and any(uid in os.readlink(link) for uid in uids):
                link.unlink()


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] != "--guard":
        sys.exit("usage: python -m support.node_reap --guard <namespace>")
    guard(sys.argv[2])
