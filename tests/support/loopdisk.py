"""A small disk of a test's own: an ext4 file system in a file, mounted through a loop device, for real disk faults.

- ``fill()``: writes a filler file until the file system is full (ENOSPC), so every write of the process on it
  fails as on a full disk; ``free()`` removes it.
- ``freeze()`` / ``thaw()``: ``fsfreeze``: every write (and fsync) to the file system blocks until it is thawed, a
  stalled disk as the kernel makes one (a process blocked there is in uninterruptible sleep: thaw before killing it).
- ``unmount()`` thaws, unmounts (lazily if busy) and removes the image. Mount points are named
  ``berth-disk-<pid>-...`` under the system's temporary directory: :func:`reap_stale` unmounts those whose run died.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

_NAME = re.compile(r"^berth-disk-(\d+)-")


def run(*argv: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(list(argv), capture_output=True, text=True, check=False)
    if check and result.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} exited {result.returncode}: {result.stderr.strip()}")
    return result


def missing_tools() -> list[str]:
    missing = [] if os.geteuid() == 0 else ["root"]
    return missing + [t for t in ("mkfs.ext4", "mount", "umount", "fsfreeze") if shutil.which(t) is None]


class LoopDisk:
    def __init__(self, size_mb: int = 64) -> None:
        self.size_mb = size_mb
        self.root = Path(tempfile.mkdtemp(prefix=f"berth-disk-{os.getpid()}-"))
        self.image = self.root / "disk.img"
        self.path = self.root / "mnt"
        self.frozen = False

    def mount(self) -> LoopDisk:
        with self.image.open("wb") as image:
            image.truncate(self.size_mb * 1024 * 1024)
        run("mkfs.ext4", "-q", "-F", "-m", "0", str(self.image))
        self.path.mkdir()
        run("mount", "-o", "loop", str(self.image), str(self.path))
        return self

    def fill(self) -> None:
        """Fill the file system up (a full disk)."""
        filler = self.path / ".filler"
        chunk = b"\0" * (1024 * 1024)
        with contextlib.suppress(OSError), filler.open("ab") as out:
            while True:
                out.write(chunk)
                out.flush()
        with contextlib.suppress(OSError), filler.open("ab") as out:  # the last blocks
            while True:
                out.write(b"\0" * 4096)
                out.flush()

    def free(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            (self.path / ".filler").unlink()

    def freeze(self) -> None:
        run("fsfreeze", "--freeze", str(self.path))
        self.frozen = True

    def thaw(self) -> None:
        run("fsfreeze", "--unfreeze", str(self.path), check=False)
        self.frozen = False

    def unmount(self) -> None:
        self.thaw()
        if run("umount", str(self.path), check=False).returncode != 0:
            run("umount", "-l", str(self.path), check=False)
        shutil.rmtree(self.root, ignore_errors=True)


def reap_stale() -> list[str]:
    """Unmount and remove the disks of runs that are gone; their mount points."""
    removed = []
    for line in run("mount", check=False).stdout.splitlines():
        words = line.split()
        if len(words) < 3 or not words[0].startswith("/dev/loop"):
            continue
        point = Path(words[2])
        match = _NAME.match(point.parent.name)
        if match is None or _alive(int(match.group(1))):
            continue
        run("fsfreeze", "--unfreeze", str(point), check=False)
        run("umount", "-l", str(point), check=False)
        shutil.rmtree(point.parent, ignore_errors=True)
        removed.append(str(point))
    return removed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
