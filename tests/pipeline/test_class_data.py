"""The class-data archive of Spark's classes (``berth.pipeline.class_data``; docs/pipeline.md, "Class data").

What a run decides before its JVM starts (use, write, or go without, from a real folder and a runtime laid out as a
JDK is), what the JVM checks an archive against making its name, the atomic move into place once the writing
process has exited, and, end to end with real JVMs: a first ``berth-analyze`` writes the archive, the next one maps
it to the same results, and a file the JVM refuses is one line and a run that still succeeds.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from berth.pipeline.class_data import (
    FAILED,
    KEPT,
    OFF,
    JavaRuntime,
    Plan,
    archive_name,
    default_directory,
    finish_writing,
    mapped,
    plan,
)

DEMO_JOURNAL = Path(__file__).parent / "data" / "demo-journal"
OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"


@pytest.fixture
def java(tmp_path: Path) -> JavaRuntime:
    """A runtime laid out as a JDK is (bin/java, release, lib/server/libjvm.so), found through JAVA_HOME."""
    home = tmp_path / "jdk"
    (home / "bin").mkdir(parents=True)
    (home / "bin" / "java").write_text("#!/bin/sh\n")
    (home / "bin" / "java").chmod(0o755)
    (home / "lib" / "server").mkdir(parents=True)
    (home / "lib" / "server" / "libjvm.so").write_bytes(b"vm")
    (home / "release").write_text('JAVA_VERSION="17.0.15"\nJAVA_RUNTIME_VERSION="17.0.15+6"\n')
    found = JavaRuntime.find({"JAVA_HOME": str(home), "PATH": ""})
    assert found is not None
    return found


@pytest.fixture
def spark_home(tmp_path: Path) -> Path:
    home = tmp_path / "spark"
    (home / "jars").mkdir(parents=True)
    for name in ("spark-core.jar", "spark-sql.jar"):
        (home / "jars" / name).write_bytes(b"classes")
    return home


def planned_run(directory: Path | str, java: JavaRuntime | None, spark_home: Path, pid: int) -> Plan:
    """What a run of process ``pid`` with 768 MiB of heap decides for ``directory``."""
    return plan(
        str(directory),
        java=java,
        spark_home=str(spark_home),
        spark_version="4.3.0",
        jvm_options=OPTIONS,
        driver_memory="768m",
        pid=pid,
    )


def test_the_runtime_is_the_one_spark_submit_starts(java: JavaRuntime, tmp_path: Path) -> None:
    assert java.version == "17.0.15"
    assert java.home == os.path.realpath(tmp_path / "jdk")
    # Without JAVA_HOME: `java` on the PATH, through its symlinks (as /usr/bin/java is on Debian).
    link_dir = tmp_path / "usr-bin"
    link_dir.mkdir()
    (link_dir / "java").symlink_to(tmp_path / "jdk" / "bin" / "java")
    on_path = JavaRuntime.find({"PATH": str(link_dir)})
    assert on_path == java
    assert JavaRuntime.find({"PATH": str(tmp_path / "nothing")}) is None


def test_the_name_changes_with_what_the_jvm_checks_an_archive_against(java: JavaRuntime, spark_home: Path) -> None:
    def name(options: str = OPTIONS, heap: str = "768m") -> str:
        return archive_name(java, str(spark_home), "4.3.0", options, heap)

    first = name()
    assert first.startswith("spark-4.3.0-java-17.0.15-") and first.endswith(".jsa")
    assert name() == first
    assert name(heap="4g") == first  # the heap's size does not shape the archive below 32 GiB...
    assert name(heap="40g") != first  # ...above, object pointers are wide and the archive's layout differs
    assert name(options="-XX:+UseSerialGC") != first
    jar = spark_home / "jars" / "spark-sql.jar"
    os.utime(jar, ns=(jar.stat().st_atime_ns, jar.stat().st_mtime_ns + 1_000_000_000))  # a reinstalled jar
    assert name() != first


def test_a_run_uses_the_archive_writes_a_missing_one_and_otherwise_goes_without(
    java: JavaRuntime, spark_home: Path, tmp_path: Path
) -> None:
    def planned(directory: Path | str, runtime: JavaRuntime | None = java) -> Plan:
        return planned_run(directory, runtime, spark_home, pid=4242)

    folder = tmp_path / "cache" / "class-data"
    write = planned(folder)
    assert folder.is_dir()
    assert write.action == "write"
    archive = write.archive
    assert write.writing_to == f"{archive}.tmp-4242"
    assert write.jvm_options() == f"-XX:ArchiveClassesAtExit={archive}.tmp-4242 -Xlog:cds*=off"

    Path(archive).write_bytes(b"archive")
    use = planned(folder)
    assert (use.action, use.archive) == ("use", archive)
    assert use.jvm_options() == f"-XX:SharedArchiveFile={archive} -Xlog:cds*=off"

    Path(archive).unlink()
    Path(archive + FAILED).write_text("no\n")
    assert planned(folder).action == "none"

    a_file = tmp_path / "a-file"
    a_file.write_text("")
    cannot = planned(a_file / "class-data")
    assert cannot.action == "none"
    assert "cannot create" in cannot.note
    assert planned(OFF).action == "none"
    assert planned(folder, runtime=None).action == "none"
    assert planned(OFF).jvm_options() == ""


def test_the_default_folder_is_the_users_cache_unless_the_environment_names_one() -> None:
    assert default_directory({"BERTH_CLASS_DATA": "/opt/berth/class-data"}) == "/opt/berth/class-data"
    assert default_directory({"XDG_CACHE_HOME": "/c"}) == "/c/berth/class-data"


def test_mapped_reads_what_a_process_maps(tmp_path: Path) -> None:
    # This very interpreter maps its own executable (by its real path, as the JVM maps its archive): /proc tells.
    assert mapped(os.getpid(), sys.executable) is True
    assert mapped(os.getpid(), str(tmp_path / "never.jsa")) is False
    assert mapped(2**22 + 7, str(tmp_path / "never.jsa"), maps_file=str(tmp_path / "gone")) is None


def test_the_archive_moves_into_place_once_the_process_that_writes_it_exits(
    java: JavaRuntime, spark_home: Path, tmp_path: Path
) -> None:
    said: list[str] = []
    folder = tmp_path / "class-data"

    def write_plan(pid: int) -> Plan:
        return planned_run(folder, java, spark_home, pid=pid)

    # A stand-in for the JVM that, like Spark's gateway, writes at the end of its stdin.
    writes = write_plan(1)
    script = "import sys; sys.stdin.read(); open(sys.argv[1], 'wb').write(b'classes')"
    process = subprocess.Popen([sys.executable, "-c", script, writes.writing_to], stdin=subprocess.PIPE)
    finish_writing(writes, process, timeout_s=60, say=said.append)
    assert Path(writes.archive).read_bytes() == b"classes"
    assert not Path(writes.writing_to).exists()
    assert said[-1].startswith(f"wrote class-data archive {writes.archive} ")

    # One that writes nothing: a marker, so later runs do not try again.
    Path(writes.archive).unlink()
    writes = write_plan(2)
    process = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    finish_writing(writes, process, timeout_s=60, say=said.append)
    assert Path(writes.archive + FAILED).exists()
    assert "wrote none" in said[-1]
    assert write_plan(3).action == "none"


def test_a_run_that_maps_an_archive_marks_it_used(java: JavaRuntime, spark_home: Path, tmp_path: Path) -> None:
    archive = Path(planned_run(tmp_path, java, spark_home, pid=1).archive or "")
    archive.write_bytes(b"classes")
    os.utime(archive, (1e9, 1e9))
    assert planned_run(tmp_path, java, spark_home, pid=2).action == "use"
    assert archive.stat().st_mtime > 1e9 + 3600


def test_writing_an_archive_keeps_the_most_recently_used_and_removes_the_rest(
    java: JavaRuntime, spark_home: Path, tmp_path: Path
) -> None:
    folder = tmp_path / "class-data"
    folder.mkdir()
    # Archives of four earlier Spark installations, last used an hour apart, oldest first.
    earlier = [folder / f"spark-3.5.{i}-java-17-{i:016x}.jsa" for i in range(4)]
    for hour, archive in enumerate(earlier):
        archive.write_bytes(b"classes")
        os.utime(archive, (1e9, 1e9 + 3600 * hour))
    unrelated = folder / "notes.txt"
    unrelated.write_text("kept\n")

    said: list[str] = []
    writes = planned_run(folder, java, spark_home, pid=2)
    os.utime(earlier[0])  # the oldest was mapped again just now, by another installation's run
    script = "import sys; sys.stdin.read(); open(sys.argv[1], 'wb').write(b'classes')"
    process = subprocess.Popen([sys.executable, "-c", script, writes.writing_to or ""], stdin=subprocess.PIPE)
    finish_writing(writes, process, timeout_s=60, say=said.append)

    left = sorted(path.name for path in folder.glob("*.jsa"))
    assert left == sorted([Path(writes.archive or "").name, earlier[0].name, earlier[3].name])
    assert len(left) == KEPT and unrelated.exists()
    assert said[1:] == [
        f"removed class-data archive {earlier[1]}, the least recently used of more than {KEPT}",
        f"removed class-data archive {earlier[2]}, the least recently used of more than {KEPT}",
    ]


def analyze(out: Path, class_data: Path) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "berth.pipeline.main", "--journal", str(DEMO_JOURNAL), "--out", str(out)]
    command += ["--master", "local[1]", "--no-report", "--class-data", str(class_data)]
    environment = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"}
    return subprocess.run(command, env=environment, capture_output=True, text=True, timeout=400, check=False)


@pytest.mark.spark
@pytest.mark.slow
@pytest.mark.timeout(1200)
@pytest.mark.soak  # three berth-analyze JVMs (1.5 min): make soak
def test_a_first_run_writes_the_archive_the_next_maps_it_and_a_refused_one_changes_nothing(tmp_path: Path) -> None:
    folder = tmp_path / "class-data"

    first = analyze(tmp_path / "first", folder)
    assert first.returncode == 0, first.stderr[-3000:]
    assert "this run writes" in first.stderr
    archives = sorted(folder.glob("*.jsa"))
    assert len(archives) == 1 and archives[0].stat().st_size > 10 * 2**20, first.stderr[-3000:]
    assert f"wrote class-data archive {archives[0]} " in first.stderr
    assert "[cds" not in first.stdout + first.stderr  # the JVM's own hundreds of CDS lines stay silent

    second = analyze(tmp_path / "second", folder)
    assert second.returncode == 0, second.stderr[-3000:]
    assert f"class data mapped from {archives[0]}" in second.stderr
    assert "refused" not in second.stderr

    def results(out: Path) -> tuple[object, object]:
        advice = json.loads((out / "advice.json").read_text())
        advice.pop("generated_at_ms")
        return advice, pq.read_table(out / "summary.parquet").to_pylist()

    assert results(tmp_path / "second") == results(tmp_path / "first")

    archives[0].write_bytes(b"not an archive")
    third = analyze(tmp_path / "third", folder)
    assert third.returncode == 0, third.stderr[-3000:]
    assert f"class-data archive {archives[0]} refused by the JVM" in third.stderr
    assert results(tmp_path / "third") == results(tmp_path / "first")
