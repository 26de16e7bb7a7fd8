"""The embedded session's size, from the journal it will read and the memory it may use (importable without Spark).

Owns the settings a run derives from its input: the driver's heap, shuffle partitions, adaptive execution, code
generation and the JVM's options.
Rules (measured with ``python -m benchmarks pipeline``; docs/pipeline.md, "Performance"):
- Heap (``--driver-memory auto``): ``BASE_HEAP`` plus a share of the journal's bytes (JSON Lines are parsed into a
  cache that holds about a fifth of their size; Parquet is read column by column and needs little more than the
  transforms' outputs), at most ``MAX_HEAP`` (beyond it Spark spills to local disk, which costs less than a larger
  heap's memory) and at most what the container's memory limit leaves after ``NON_HEAP`` (the JVM's code,
  metaspace, threads and buffers, and the Python driver), never under ``MIN_HEAP``. An explicit size wins.
- Shuffle partitions: one per ``BYTES_PER_PARTITION`` of journal, at least one, at most
  ``PARTITIONS_PER_CORE`` per core. A demo's journal runs in one partition per stage, not six
  tasks of nothing each.
- Adaptive execution (AQE) only with more than one shuffle partition: it re-plans after every shuffle stage and
  runs each stage as a job of its own (32 jobs instead of 10 for a demo's journal), to coalesce or split
  partitions; one partition leaves it nothing to do but start jobs.
- Code generation only from ``SMALL_JOURNAL_BYTES`` of journal on: below it, compiling the generated Java (Janino,
  on a cold JVM) is a cost that interpreting a few thousand rows does not repay. Whole-stage code generation and
  each expression's (``cluster.size_sql``) both: for 100 events, interpreting the expressions as well saved 2-6 of
  the run's CPU-seconds (docs/pipeline.md, "Performance").
- JVM options: the client compiler only (``-XX:TieredStopAtLevel=1``) and the serial collector. On two cores the
  server compiler's threads cost more CPU than its faster code saves (1M events: 80 CPU-s against 52), and a
  parallel or concurrent collector's threads compete with the two task threads; the serial collector also keeps
  the heap, and so the resident memory, no larger than the run needs.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Literal

MIB = 2**20
GIB = 2**30
BASE_HEAP = 768 * MIB
MIN_HEAP = 512 * MIB
MAX_HEAP = 4 * GIB
NON_HEAP = 640 * MIB
# The heap a byte of journal needs on top of BASE_HEAP.
HEAP_PER_BYTE = {"jsonl": 0.25, "parquet": 1.0}
BYTES_PER_PARTITION = 32 * MIB
PARTITIONS_PER_CORE = 3
SMALL_JOURNAL_BYTES = 8 * MIB
JVM_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
AUTO = "auto"

# cgroup v2, then v1: the memory limit of the container this runs in.
_LIMIT_FILES = (Path("/sys/fs/cgroup/memory.max"), Path("/sys/fs/cgroup/memory/memory.limit_in_bytes"))


def driver_heap_bytes(journal_bytes: int | None, fmt: Literal["jsonl", "parquet"], limit_bytes: int | None) -> int:
    """The heap for a local run over ``journal_bytes`` of ``fmt`` within a memory limit (module rules)."""
    wanted = BASE_HEAP + int((journal_bytes or 0) * HEAP_PER_BYTE[fmt])
    ceiling = MAX_HEAP if limit_bytes is None else min(MAX_HEAP, limit_bytes - NON_HEAP)
    return max(MIN_HEAP, min(wanted, ceiling))


def driver_memory(
    requested: str, journal_bytes: int | None, fmt: Literal["jsonl", "parquet"], limit_bytes: int | None
) -> str:
    """``--driver-memory`` as Spark takes it: the request itself, or ``auto`` sized (in MiB)."""
    if requested != AUTO:
        return requested
    return f"{driver_heap_bytes(journal_bytes, fmt, limit_bytes) // MIB}m"


def shuffle_partitions(journal_bytes: int | None, cores: int) -> int:
    """Shuffle partitions for ``cores`` task slots over ``journal_bytes`` (unknown: as many as the cores allow)."""
    most = max(1, PARTITIONS_PER_CORE * cores)
    if journal_bytes is None:
        return most
    return max(1, min(most, math.ceil(journal_bytes / BYTES_PER_PARTITION)))


def adaptive_execution(partitions: int) -> bool:
    """Whether adaptive execution pays for ``partitions`` shuffle partitions (module rules)."""
    return partitions > 1


def whole_stage_codegen(journal_bytes: int | None) -> bool:
    """Whether whole-stage code generation pays for ``journal_bytes`` (unknown: assume a large journal)."""
    return journal_bytes is None or journal_bytes >= SMALL_JOURNAL_BYTES


def memory_limit_bytes(files: tuple[Path, ...] = _LIMIT_FILES) -> int | None:
    """This container's memory limit, or None when there is none (or no cgroup tells)."""
    for path in files:
        try:
            text = path.read_text().strip()
        except OSError:
            continue
        if text.isdigit() and int(text) < 2**60:  # v1 reports "no limit" as a huge number, v2 as "max"
            return int(text)
        return None
    return None
