"""A deliberate-bug check (``make mutants``): the invariants that matter most, each broken on purpose in a copy of the
tree, and the tests that name it run against the broken copy; every one must fail.

A mutant is one textual change to one file (:class:`Mutant`: the text, what it becomes, the invariant it breaks,
the tests that must catch it). The copy is the working tree's tracked and untracked, not ignored files (what
``git ls-files`` lists), so uncommitted changes are checked too; its three portions come first on the path of every
process the tests start (the coordinator and operator processes included), so the copy is what runs. First the
tests run on the copy as it is (they must pass: a mutant caught by a test that fails anyway proves nothing), then
once per mutant, restored after. Prints one line per mutant and exits 1 when a mutant survived or a baseline
failed. ``--only NAME`` runs one mutant (and its baseline).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PORTIONS = ("coordinator", "operator", "pipeline")


@dataclass(frozen=True)
class Mutant:
    name: str
    invariant: str
    path: str
    text: str
    becomes: str
    tests: tuple[str, ...]


MUTANTS = (
    Mutant(
        "stalled-write-heartbeat",
        "a heartbeat of a group whose write is not durable yet waits for that write",
        "coordinator/berth/coordinator/http/engine.py",
        "if answered_ticket == ticket and needed <= self._completed:",
        "if answered_ticket == ticket:",
        ("tests/http/test_storage_faults.py",),
    ),
    Mutant(
        "reply-before-durable",
        "a reply that needs a write is released only once the write is durable",
        "coordinator/berth/coordinator/http/engine.py",
        "            if needed <= self._completed:\n                self._resolve(ticket, response)",
        "            if True:\n                self._resolve(ticket, response)",
        ("tests/http/test_storage_faults.py",),
    ),
    Mutant(
        "member-key-left-behind",
        "a removed or re-keyed member's etcd key is deleted unless its successor overwrites it (no ghost on reload)",
        "coordinator/berth/coordinator/store/etcd/txn.py",
        "        if (group_id, slot) not in placed:",
        "        if False:",
        ("tests/store/test_etcd_layout.py",),
    ),
    Mutant(
        "leave-from-the-cache",
        "a batch leave planned from the watch cache is planned again from a fresh look before it is sent",
        "operator/berth/operator/reconcile/scaling.py",
        "    if view.from_cache and any(isinstance(action, BatchLeave) for action in plan.actions):",
        "    if False:",
        ("tests/operator/unit/test_fleet_pass_on_ports.py",),
    ),
    Mutant(
        "leave-before-the-shrink",
        "no batch leave before the StatefulSet's controller has acted on the shrink",
        "operator/berth/operator/planners/scaling.py",
        "        if workload != desired or not obs.workload_settled:",
        "        if workload != desired:",
        ("tests/operator/unit/test_plan_scaling_stories.py", "tests/operator/unit/test_plan_scaling_properties.py"),
    ),
    Mutant(
        "delete-a-group-with-foreign-members",
        "a deletion keeps the group (and its offsets) while members the fleet did not create are in it",
        "operator/berth/operator/planners/scaling.py",
        "        elif obs.delete_group and not foreign:",
        "        elif obs.delete_group:",
        ("tests/operator/unit/test_plan_scaling_stories.py", "tests/operator/unit/test_plan_scaling_properties.py"),
    ),
    Mutant(
        "empty-batch-leave",
        "a removal never goes out with an empty list (KIP-571: it would remove every member)",
        "operator/berth/operator/adapters/kafka/port.py",
        "if not instance_ids:",
        "if False:",
        ("tests/operator/unit/test_kafka_port_errors.py",),
    ),
    Mutant(
        "writes-without-owner",
        "every coordinator write of a scaling plan names the fleet as the group's owner where the kind records owners",
        "operator/berth/operator/reconcile/driver.py",
        "patch_status, owner_uid = a.record.write_changes, a.group.kind.owner_uid(a.record.uid)",
        "patch_status, owner_uid = a.record.write_changes, None",
        ("tests/operator/unit/test_fleet_pass_on_ports.py",),
    ),
    Mutant(
        "untrimmed-status-writes",
        "a pass writes only what changes in status: an idle fleet's pass writes nothing",
        "operator/berth/operator/planners/fleet_status.py",
        " if _without_nulls(status.get(key)) != _without_nulls(value)}",
        "}",
        ("tests/operator/unit/test_fleet_pass_on_ports.py",),
    ),
    Mutant(
        "restarts-lost-on-a-failed-write",
        "restarts taken for a status write that fails are given back (counted once, never lost)",
        "operator/berth/operator/reconcile/contributors/restarts.py",
        "        memory.activity = memory.activity + taken",
        "        pass",
        ("tests/operator/unit/test_fleet_pass_on_ports.py",),
    ),
    Mutant(
        "session-timeout-lost-on-a-failed-pass",
        "the session timeout a pass gave the pods is recorded however the pass ends",
        "operator/berth/operator/reconcile/fleet_pass.py",
        "        try:\n            await record.flush()\n        except ApiCallFailed as error:",
        "        try:\n            pass\n        except ApiCallFailed as error:",
        ("tests/operator/unit/test_fleet_pass_on_ports.py",),
    ),
    Mutant(
        "pokes-not-coalesced",
        "a key is due at most once: a burst of pokes is one pass",
        "operator/berth/operator/reconcile/queue.py",
        "        if current is not None and current <= at:\n            return\n",
        "",
        ("tests/operator/unit/test_watch_loop.py",),
    ),
    Mutant(
        "journal-follower-spins",
        "the journal follower never polls in a tight loop, whatever the coordinator answers",
        "operator/berth/operator/reconcile/journal_follower.py",
        "                await self.sleep(MIN_EMPTY_POLL_S)",
        "                pass",
        ("tests/operator/unit/test_journal_follower.py",),
    ),
    Mutant(
        "journal-declaration-needs-msgspec",
        "the journal event's declaration imports only the standard library",
        "coordinator/berth/coordinator/formats/journal.py",
        "from collections.abc import Sequence\n",
        "from collections.abc import Sequence\n\nimport msgspec  # noqa: F401\n",
        ("tests/unit/coordinator/test_journal_declaration.py",),
    ),
    Mutant(
        "loose-modules-allowed",
        "a module added at the operator's top level without a place in its layers fails lint-imports",
        "pyproject.toml",
        'containers = ["berth.operator"]\nexhaustive = true\n',
        'containers = ["berth.operator"]\n',
        ("tests/test_import_contracts.py",),
    ),
)


def files() -> list[str]:
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    return [name for name in listed.stdout.splitlines() if (ROOT / name).is_file()]


def copy_tree(into: Path) -> None:
    for name in files():
        target = into / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, target)
    tools = ROOT / ".tools"
    if tools.exists():
        (into / ".tools").symlink_to(tools)


def run_tests(copy: Path, tests: Sequence[str]) -> tuple[bool, float]:
    """Whether ``tests`` pass on ``copy``, and how long they took."""
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(str(copy / portion) for portion in PORTIONS),
        "PATH": os.pathsep.join((str(Path(sys.executable).parent), os.environ.get("PATH", ""))),
    }
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", *tests],
        cwd=copy,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        timeout=1800,
    )
    return done.returncode == 0, time.monotonic() - started


def check(mutants: Sequence[Mutant]) -> int:
    with tempfile.TemporaryDirectory(prefix="berth-mutants-") as folder:
        copy = Path(folder)
        copy_tree(copy)
        baseline = sorted({test for mutant in mutants for test in mutant.tests})
        passed, seconds = run_tests(copy, baseline)
        said = "pass" if passed else "FAIL"
        print(f"baseline: {len(baseline)} test files {said} on the unmutated copy ({seconds:.0f} s)")
        if not passed:
            return 1
        survived = 0
        for mutant in mutants:
            path = copy / mutant.path
            original = path.read_text()
            if original.count(mutant.text) != 1:
                print(f"{mutant.name}: its text is not found exactly once in {mutant.path} (the code moved?)")
                survived += 1
                continue
            path.write_text(original.replace(mutant.text, mutant.becomes))
            try:
                passed, seconds = run_tests(copy, mutant.tests)
            finally:
                path.write_text(original)
            verdict = "SURVIVED" if passed else "caught"
            survived += passed
            print(f"{verdict:8} {mutant.name:40} {seconds:5.0f} s  {mutant.invariant}")
        print(f"{len(mutants) - survived} of {len(mutants)} deliberate bugs caught")
        return 1 if survived else 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="mutants", description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", action="append", help="run only the mutant of this name (repeatable)")
    args = parser.parse_args(argv)
    chosen = [m for m in MUTANTS if not args.only or m.name in args.only]
    unknown = set(args.only or ()) - {m.name for m in chosen}
    if unknown:
        parser.error(f"no mutant named {', '.join(sorted(unknown))}")
    return check(chosen)


if __name__ == "__main__":
    sys.exit(main())
