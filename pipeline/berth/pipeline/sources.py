"""Where a journal lives and in which format: turns the ``--journal`` argument into the paths Spark reads.

Owns the rules for what counts as a journal, checked before a JVM starts so that a wrong path fails in a second:
- a directory of ``*.jsonl`` segment files, as the coordinator writes them under ``<data-dir>/journal/``;
- a directory of Parquet files (``berth-analyze convert`` output, any partition layout);
- a single file (``.parquet`` is Parquet, anything else JSON Lines) or a glob of files.
Remote URIs (``s3a://``, ``hdfs://``, ...) cannot be checked here: they pass through, JSON Lines unless the path
says Parquet or ``--format parquet`` is given. A missing or empty journal raises ``JournalError``.
"""

from __future__ import annotations

import fnmatch
import glob
import os
import re
from dataclasses import dataclass
from typing import Literal

JournalFormat = Literal["jsonl", "parquet"]
FORMAT_CHOICES = ("auto", "jsonl", "parquet")

_GLOB_CHARS = frozenset("*?[")
_LOCAL_MASTER = re.compile(r"^local(-cluster)?(\[.*\])?$")


class JournalError(Exception):
    """The journal cannot be analysed: missing, empty, or nothing in it parses. The message is one line."""


@dataclass(frozen=True)
class JournalSource:
    """What to read: the format, the paths handed to Spark, and which files of a directory to take."""

    format: JournalFormat
    paths: tuple[str, ...]
    file_filter: str | None = None


def resolve_journal_source(path: str, requested_format: str = "auto") -> JournalSource:
    """Check ``path`` and say how to read it; raises ``JournalError`` for a missing or empty journal."""
    if requested_format not in FORMAT_CHOICES:
        raise JournalError(f"unknown journal format {requested_format!r} (choose from {', '.join(FORMAT_CHOICES)})")
    if _is_remote(path):
        return JournalSource(_remote_format(path, requested_format), (path,))
    local_path = path.removeprefix("file://")
    if _GLOB_CHARS.intersection(local_path):
        return _resolve_glob(local_path, requested_format)
    if os.path.isdir(local_path):
        return _resolve_directory(local_path, requested_format)
    if os.path.isfile(local_path):
        return _resolve_files([local_path], requested_format, described_as=local_path)
    raise JournalError(f"journal not found: {path}")


def journal_bytes(source: JournalSource) -> int | None:
    """The bytes Spark will read for ``source`` (sizes the local session before it starts); None when they are
    out of sight (a remote URI) or vanish meanwhile."""
    total = 0
    try:
        for path in source.paths:
            if _is_remote(path):
                return None
            local = path.removeprefix("file://")
            if os.path.isfile(local):
                total += os.path.getsize(local)
                continue
            for root, _dirs, files in os.walk(local):
                wanted = (f for f in files if fnmatch.fnmatch(f, source.file_filter or "*.parquet"))
                total += sum(os.path.getsize(os.path.join(root, f)) for f in wanted)
                if source.file_filter is not None:
                    break  # segment directories are flat: Spark reads the folder itself, not below it
    except OSError:
        return None
    return total


def is_local_master(master: str) -> bool:
    """``local``, ``local[...]``, ``local-cluster[...]``: executors on the driver's machine, reading its disk."""
    return bool(_LOCAL_MASTER.match(master.strip()))


def is_filesystem_path(path: str) -> bool:
    """A path each machine resolves on its own disk (no scheme, or ``file://``), unlike a URI of shared storage."""
    return not _is_remote(path)


def _is_remote(path: str) -> bool:
    return "://" in path and not path.startswith("file://")


def _remote_format(path: str, requested_format: str) -> JournalFormat:
    if requested_format != "auto":
        return "parquet" if requested_format == "parquet" else "jsonl"
    return "parquet" if "parquet" in path.lower() else "jsonl"


def _resolve_glob(pattern: str, requested_format: str) -> JournalSource:
    files = sorted(p for p in glob.glob(pattern) if os.path.isfile(p))
    if not files:
        raise JournalError(f"journal not found: no file matches {pattern}")
    return _resolve_files(files, requested_format, described_as=pattern)


def _resolve_files(files: list[str], requested_format: str, described_as: str) -> JournalSource:
    if requested_format == "auto":
        fmt: JournalFormat = "parquet" if all(f.endswith(".parquet") for f in files) else "jsonl"
    else:
        fmt = "parquet" if requested_format == "parquet" else "jsonl"
    if fmt == "jsonl" and all(os.path.getsize(f) == 0 for f in files):
        raise JournalError(f"journal is empty: {described_as}")
    return JournalSource(fmt, tuple(files))


def _resolve_directory(directory: str, requested_format: str) -> JournalSource:
    segments = sorted(glob.glob(os.path.join(glob.escape(directory), "*.jsonl")))
    parquet_files = _parquet_files_under(directory)
    wants_jsonl = requested_format == "jsonl" or (requested_format == "auto" and segments)
    if wants_jsonl:
        if not segments:
            raise JournalError(f"journal is empty: no *.jsonl segment files in {directory}")
        if all(os.path.getsize(s) == 0 for s in segments):
            raise JournalError(f"journal is empty: every *.jsonl segment in {directory} is empty")
        # The folder plus a file filter rather than thousands of paths: Spark lists it once.
        return JournalSource("jsonl", (directory,), file_filter="*.jsonl")
    if not parquet_files:
        raise JournalError(f"journal is empty: no *.jsonl segment or Parquet files in {directory}")
    return JournalSource("parquet", (directory,))


def _parquet_files_under(directory: str) -> list[str]:
    found: list[str] = []
    for root, _dirs, files in os.walk(directory):
        found.extend(os.path.join(root, f) for f in files if f.endswith(".parquet"))
        if found:
            break  # one is enough to decide the format
    return found
