"""A Class Data Sharing archive of the classes Spark's driver JVM loads: written once, mapped by every later run.

Owns where the archive lives, when a run writes it, when it uses it, and what it says about either (importable
without Spark). A JVM that maps the classes it loaded before, already parsed and verified, starts and plans in
about 6 CPU-seconds less than one that reads them from Spark's 280 jars (docs/pipeline.md, "Performance").
Rules:
- One archive per Java runtime, Spark installation and JVM options that shape it (``archive_name``): the JVM
  maps a dynamic archive only on the base archive, the class path (every jar's size and modification time) and
  the compressed-pointer layout it was written with, so those make its name. Nothing else is shared between
  keys; an archive of another key is never tried.
- ``plan`` decides before the JVM starts: an archive with this run's name is used (``-XX:SharedArchiveFile``);
  without one, this run writes it (``-XX:ArchiveClassesAtExit``) if the folder is writable; a read-only folder
  (an image's, a locked-down home) or an earlier failed attempt only means running without, said in one line.
  ``off`` (``--class-data off``, ``BERTH_CLASS_DATA=off``) turns all of it off; ``--class-data-write never`` uses
  an archive that exists and never writes one (``berth-demo``: writing it costs a first run about a minute after
  its work is done, issue 30).
- The JVM writes the archive when it exits, so a writing run waits for its JVM after the session stopped (a few
  seconds, once) and then renames the file into place: readers only ever see a whole archive. A JVM that wrote
  nothing leaves a ``.failed`` marker, so later runs do not pay for the attempt again; an attempt interrupted
  leaves a ``.tmp-PID`` file that the next attempt removes once it is an hour old.
- The folder stays bounded: a run that uses an archive marks it used (its modification time), and a run that has
  just written one keeps the ``KEPT`` most recently used archives, its own among them, and removes the rest (a
  reinstalled pyspark or another Java would otherwise leave ~170 MiB behind each time). A process that maps a
  removed archive keeps its mapping; a later run of that key writes it again.
- The JVM may refuse an archive (``-Xshare:auto``, its default: never a failed start), so its own CDS warnings are
  silenced and ``mapped`` checks instead that the JVM maps the file (Linux ``/proc/PID/maps``): a refusal is one
  line, and the run goes on.
"""

from __future__ import annotations

import contextlib
import glob
import hashlib
import os
import re
import shutil
import subprocess
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

OFF = "off"
ENV = "BERTH_CLASS_DATA"
SUFFIX = ".jsa"
FAILED = ".failed"
STALE_TMP_S = 3600
#: Archives kept in a folder after a run wrote one: the new one and the two used most recently before it.
KEPT = 3
# Silences the JVM's own CDS lines (hundreds of "Skipping ..." warnings when writing; a refused archive's warning
# on stdout when mapping): ``mapped`` and the run's progress lines say what matters.
QUIET = "-Xlog:cds*=off"
# Compressed object pointers need a heap under 32 GiB; the JVM maps an archive only in the layout it was written in.
COMPRESSED_OOPS_LIMIT = 32 * 2**30
_MEMORY = re.compile(r"^\s*(\d+)\s*([kmgt]?)b?\s*$", re.IGNORECASE)
_UNITS = {"": 2**20, "k": 2**10, "m": 2**20, "g": 2**30, "t": 2**40}  # Spark reads a bare number as MiB


def default_directory(environ: Mapping[str, str]) -> str:
    """``$BERTH_CLASS_DATA``, else ``$XDG_CACHE_HOME/berth/class-data`` (``~/.cache/berth/class-data``)."""
    if environ.get(ENV):
        return environ[ENV]
    cache = environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(cache, "berth", "class-data")


@dataclass(frozen=True)
class JavaRuntime:
    """The JVM that spark-submit starts: ``$JAVA_HOME/bin/java``, else ``java`` on the PATH (as spark-class)."""

    home: str
    version: str
    identity: str  # what the JVM checks an archive against: its version string and the VM library's size and time

    @staticmethod
    def find(environ: Mapping[str, str]) -> JavaRuntime | None:
        java_home = environ.get("JAVA_HOME")
        java = os.path.join(java_home, "bin", "java") if java_home else shutil.which("java", path=environ.get("PATH"))
        if java is None or not os.path.exists(java):
            return None
        home = os.path.dirname(os.path.dirname(os.path.realpath(java)))
        release = _release(os.path.join(home, "release"))
        version = release.get("JAVA_VERSION") or "unknown"
        build = release.get("JAVA_RUNTIME_VERSION") or version
        libraries = sorted(glob.glob(os.path.join(home, "lib", "*", "libjvm.so")))
        return JavaRuntime(home, version, f"{build} {home} {_stat_text(libraries)}")


@dataclass(frozen=True)
class Plan:
    """What a run does with the archive: ``use`` it, ``write`` it when its JVM exits, or run without (``none``)."""

    action: Literal["use", "write", "none"]
    archive: str | None  # the archive's path (to use, or to write)
    note: str  # one line for the progress stream
    writing_to: str | None = None  # the temporary file the JVM writes, renamed to ``archive`` afterwards

    def jvm_options(self) -> str:
        if self.action == "use":
            return f"-XX:SharedArchiveFile={self.archive} {QUIET}"
        if self.action == "write":
            return f"-XX:ArchiveClassesAtExit={self.writing_to} {QUIET}"
        return ""


def heap_bytes(driver_memory: str) -> int | None:
    """A Spark memory string (``768m``, ``4g``, ``2048``) in bytes; None when it is not one."""
    match = _MEMORY.match(driver_memory)
    return None if match is None else int(match.group(1)) * _UNITS[match.group(2).lower()]


def archive_name(java: JavaRuntime, spark_home: str, spark_version: str, jvm_options: str, driver_memory: str) -> str:
    """The archive's file name for this JVM, Spark installation, options and pointer layout (module rules)."""
    jars = sorted(glob.glob(os.path.join(spark_home, "jars", "*.jar")))
    heap = heap_bytes(driver_memory)
    layout = "compressed-oops" if heap is None or heap < COMPRESSED_OOPS_LIMIT else "wide-oops"
    parts = [java.identity, os.path.realpath(spark_home), spark_version, _stat_text(jars), jvm_options, layout]
    digest = hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]
    return f"spark-{spark_version}-java-{_safe(java.version)}-{digest}{SUFFIX}"


def plan(
    directory: str,
    *,
    java: JavaRuntime | None,
    spark_home: str,
    spark_version: str,
    jvm_options: str,
    driver_memory: str,
    pid: int,
    write: bool = True,
) -> Plan:
    """What this run does (module rules); ``directory`` ``off`` turns the archive off; ``write`` False uses an archive
    that exists and never writes one (``--class-data-write never``: a run that must not wait for it at exit)."""
    if directory == OFF:
        return Plan("none", None, "class-data archive off")
    if java is None:
        return Plan("none", None, "class-data archive: no Java runtime found")
    archive = os.path.join(directory, archive_name(java, spark_home, spark_version, jvm_options, driver_memory))
    if os.path.isfile(archive):
        with contextlib.suppress(OSError):  # marks it used (module rules); a read-only folder's stays as it is
            os.utime(archive)
        return Plan("use", archive, f"class data from {archive}")
    if not write:
        return Plan(
            "none",
            None,
            f"no class-data archive yet for Java {java.version} and Spark {spark_version}; not written by this run"
            " (the next berth-analyze without --class-data-write never writes it, and the runs after it map it)",
        )
    if os.path.exists(archive + FAILED):
        return Plan("none", None, f"class-data archive: an earlier run could not write {archive} ({FAILED} marker)")
    try:
        os.makedirs(directory, exist_ok=True)
        writable = os.access(directory, os.W_OK | os.X_OK)
    except OSError as e:
        return Plan("none", None, f"class-data archive: cannot create {directory} ({e.strerror or e}); running without")
    if not writable:
        return Plan("none", None, f"class-data archive: {directory} is read-only; running without")
    _remove_stale(directory)
    return Plan(
        "write",
        archive,
        f"no class-data archive yet for Java {java.version} and Spark {spark_version}: this run writes {archive}",
        writing_to=f"{archive}.tmp-{pid}",
    )


def mapped(pid: int, archive: str, maps_file: str | None = None) -> bool | None:
    """Whether process ``pid`` maps ``archive`` (None where ``/proc`` does not tell)."""
    try:
        text = Path(maps_file or f"/proc/{pid}/maps").read_text()
    except OSError:
        return None
    real = os.path.realpath(archive)
    return any(line.endswith((" " + archive, " " + real)) for line in text.splitlines())


def finish_writing(
    written: Plan, jvm: subprocess.Popen[bytes] | None, timeout_s: float, say: Callable[[str], None]
) -> None:
    """After the session stopped: let the JVM exit (it writes the archive then), and move the archive into place;
    a JVM that wrote nothing leaves the ``.failed`` marker (module rules)."""
    if written.action != "write" or written.archive is None or written.writing_to is None:
        return
    if jvm is None:
        say("class-data archive: the JVM is not this process's child; nothing written")
        return
    started = time.monotonic()
    if jvm.stdin is not None:
        jvm.stdin.close()  # Spark's gateway exits at the end of its stdin
    try:
        jvm.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        say(f"class-data archive: the JVM did not exit within {timeout_s:.0f} s; not written")
        _remove(written.writing_to)
        return
    if jvm.returncode == 0 and os.path.isfile(written.writing_to) and os.path.getsize(written.writing_to) > 0:
        os.replace(written.writing_to, written.archive)
        os.utime(written.archive)  # the most recently used: prune keeps it
        size = os.path.getsize(written.archive) / 2**20
        say(f"wrote class-data archive {written.archive} ({size:,.0f} MiB, {time.monotonic() - started:.1f} s)")
        for removed in prune(os.path.dirname(written.archive), KEPT):
            say(f"removed class-data archive {removed}, the least recently used of more than {KEPT}")
        return
    _remove(written.writing_to)
    with contextlib.suppress(OSError):
        Path(written.archive + FAILED).write_text(f"the JVM exited {jvm.returncode} without writing the archive\n")
    say(f"class-data archive: the JVM wrote none (exit status {jvm.returncode}); later runs go without")


def prune(directory: str, kept: int) -> list[str]:
    """Removes all but the ``kept`` most recently used archives in ``directory``; what it removed, oldest first."""
    archives = sorted(glob.glob(os.path.join(glob.escape(directory), f"*{SUFFIX}")), key=_used_at, reverse=True)
    removed = []
    for path in reversed(archives[kept:]):
        with contextlib.suppress(OSError):
            os.remove(path)
            removed.append(path)
    return removed


def _used_at(path: str) -> float:
    try:
        return os.path.getmtime(path)
    except OSError:
        return 0.0


def _release(path: str) -> dict[str, str]:
    try:
        text = Path(path).read_text()
    except OSError:
        return {}
    pairs = (line.split("=", 1) for line in text.splitlines() if "=" in line)
    return {key.strip(): value.strip().strip('"') for key, value in pairs}


def _stat_text(paths: list[str]) -> str:
    lines = []
    for path in paths:
        try:
            stat = os.stat(path)
        except OSError:
            continue
        lines.append(f"{os.path.basename(path)} {stat.st_size} {stat.st_mtime_ns}")
    return "\n".join(lines)


def _safe(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9.]+", "_", text)


def _remove_stale(directory: str) -> None:
    """Temporary archives of interrupted attempts, once they are an hour old (a live attempt's is younger)."""
    for path in glob.glob(os.path.join(directory, f"*{SUFFIX}.tmp-*")):
        try:
            if time.time() - os.path.getmtime(path) > STALE_TMP_S:
                os.remove(path)
        except OSError:
            continue


def _remove(path: str) -> None:
    with contextlib.suppress(OSError):
        os.remove(path)
