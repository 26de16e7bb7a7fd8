"""Failpoints: named places in the daemons where a test makes the process crash, stall or fail (off by default).

A failpoint is a call ``failpoints.hit("store.before_commit")`` at a place where something can go wrong in
production (a crash between two steps, a slow disk). It does nothing unless the process was started with
``BERTH_FAILPOINTS`` naming it, so the cost in production is one truth test of a module global.

``BERTH_FAILPOINTS`` is a ``;``-separated list of ``name=action``; an action is one of

- ``crash``: end the process at once with ``os._exit(137)`` (what ``kill -9`` leaves: nothing flushed, no cleanup);
- ``sleep:MS``: block the calling thread MS milliseconds (a stall of that step: on an event loop, of everything);
- ``delay:MS``: hold that step MS milliseconds while the rest of the process goes on (an awaited sleep: the event
  loop keeps serving; the operator's elector keeps renewing its Lease); only at the points of :data:`AWAITED`, which
  are passed with ``await`` :func:`reached`;
- ``sleep:PATH`` and ``delay:PATH`` (an absolute path): the same, until the file PATH exists instead of for a time,
  so that a test orders a step after something it saw rather than after a guess of how long that takes; the process
  says on stderr when it starts waiting (``berth: failpoint NAME: waiting for PATH``);
- ``error``: raise :class:`FailpointError` (the step fails as an I/O error would);
- ``on``: nothing happens at :func:`hit`; :func:`enabled` answers True (the switches below).

followed optionally by ``@N`` (act on the Nth hit only, counting from 1) or ``%P`` (act on each hit with probability
P, drawn from a generator seeded with ``BERTH_FAILPOINTS_SEED``, so a run is repeatable).

Switches (``enabled``) re-introduce bugs that were fixed, so that a test can show that the robustness checker
reports them (tests/robustness); their names start with ``bug.``. Nothing in production sets them.

The points are listed in :data:`POINTS` (docs/reliability.md, "Failpoints"); naming one that does not exist is an
error at start, so a typo cannot make a campaign test nothing. Standard library only.
"""

from __future__ import annotations

import asyncio
import os
import random
import sys
import threading
import time
from dataclasses import dataclass

#: Every failpoint and switch the daemons have, with where it sits.
POINTS: dict[str, str] = {
    "store.before_commit": "the store writer, before a transaction is committed (SQLite or etcd)",
    "store.after_commit": "the store writer, after a transaction committed, before its journal lines and answers",
    "journal.after_append": "the SQLite store writer, after the journal segments were appended, before the answers",
    "engine.parked": "a request (a JoinGroup or SyncGroup waiting for its rebalance) was parked",
    "load.record": "the coordinator's load (start, failover, a group's reload), at each record replayed",
    "operator.before_leave": "the operator, before a batch leave is checked against the leader's gate and sent",
    "operator.after_leave": "the operator, after the coordinator answered a batch leave, before anything is recorded",
    "bug.ack_failed_writes": "switch: answers gated on a write that failed are released as successes (issue 28 R1)",
    "bug.ignore_leader_key": "switch: the active replica does not watch its own leader key (issue 28 R2)",
    "bug.unguarded_first_start": "switch: a new prefix is claimed without a transaction (issue 28 R3)",
    "bug.ready_while_refused": "switch: readiness ignores a store that refuses writes (issue 28 R4)",
    "bug.operator_no_release": "switch: the operator neither releases its Lease nor checks its deadline (R5)",
}

#: Points passed on an event loop with ``await reached(name)``: the only ones where ``delay`` is taken.
AWAITED = frozenset({"operator.before_leave", "operator.after_leave"})

#: Points past a durable step: ``error`` there would report a durable write failed, so only crash and sleep are taken.
AFTER_DURABLE = frozenset({"store.after_commit", "journal.after_append"})

ENV = "BERTH_FAILPOINTS"
SEED_ENV = "BERTH_FAILPOINTS_SEED"
CRASH_STATUS = 137
#: How often a ``sleep:PATH`` or ``delay:PATH`` looks for its file.
UNTIL_POLL_S = 0.02


class FailpointError(OSError):
    """Raised by a failpoint whose action is ``error``."""


@dataclass
class _Action:
    kind: str  # crash, sleep, delay, error, on
    sleep_ms: int = 0
    until: str = ""  # sleep and delay: the file whose existence ends them (instead of sleep_ms)
    nth: int | None = None
    probability: float | None = None
    hits: int = 0


_ACTIVE: dict[str, _Action] = {}
_LOCK = threading.Lock()
_RANDOM = random.Random()


def parse(text: str) -> dict[str, _Action]:
    """``BERTH_FAILPOINTS``'s value as actions; ``ValueError`` naming what is wrong."""
    actions: dict[str, _Action] = {}
    for item in filter(None, (part.strip() for part in text.split(";"))):
        name, sep, spec = item.partition("=")
        if not sep or name not in POINTS:
            raise ValueError(f"{ENV}: {item!r}: expected NAME=ACTION with NAME one of {', '.join(POINTS)}")
        nth: int | None = None
        probability: float | None = None
        if "@" in spec:
            spec, _, count = spec.partition("@")
            nth = int(count)
            if nth < 1:
                raise ValueError(f"{ENV}: {item!r}: @N counts from 1")
        elif "%" in spec:
            spec, _, chance = spec.partition("%")
            probability = float(chance)
            if not 0 < probability <= 1:
                raise ValueError(f"{ENV}: {item!r}: %P is a probability in (0, 1]")
        kind, _, argument = spec.partition(":")
        if kind not in ("crash", "sleep", "delay", "error", "on") or (kind in ("sleep", "delay")) != bool(argument):
            raise ValueError(f"{ENV}: {item!r}: the action is crash, sleep:MS|PATH, delay:MS|PATH, error or on")
        until = argument if argument.startswith("/") else ""
        if argument and not until and not argument.isdigit():
            raise ValueError(f"{ENV}: {item!r}: {kind} takes milliseconds or an absolute path")
        if kind == "delay" and name not in AWAITED:
            awaited = ", ".join(sorted(AWAITED))
            raise ValueError(f"{ENV}: {item!r}: delay is taken where an event loop awaits: {awaited}")
        if kind == "error" and name in AFTER_DURABLE:
            raise ValueError(f"{ENV}: {item!r}: {name} comes after a durable step; crash or sleep there")
        actions[name] = _Action(kind, int(argument) if argument and not until else 0, until, nth, probability)
    return actions


def configure(text: str | None = None, seed: str | None = None) -> None:
    """Read the failpoints from ``text`` (default: the environment); called once at import."""
    global _ACTIVE
    _ACTIVE = parse(os.environ.get(ENV, "") if text is None else text)
    _RANDOM.seed(os.environ.get(SEED_ENV, "0") if seed is None else seed)
    if _ACTIVE:
        print(f"berth: failpoints on: {', '.join(sorted(_ACTIVE))}", file=sys.stderr, flush=True)


def enabled(name: str) -> bool:
    """Whether the switch ``name`` is on (a ``bug.`` re-introduction, for the checker's own tests)."""
    return bool(_ACTIVE) and name in _ACTIVE


def hit(name: str) -> None:
    """Pass the failpoint ``name``: nothing, unless a test enabled it."""
    action = _due(name)
    if action is not None:
        _act(name, action)


async def reached(name: str) -> None:
    """Pass the failpoint ``name`` on an event loop (one of :data:`AWAITED`): as :func:`hit`, and ``delay`` holds only
    the awaiting task."""
    action = _due(name)
    if action is None:
        return
    if action.kind == "delay" and action.until:
        _waiting(name, action.until)
        # A file a test creates, not an event of this process; a stat takes microseconds.
        while not os.path.exists(action.until):  # noqa: ASYNC240, ASYNC110
            await asyncio.sleep(UNTIL_POLL_S)
    elif action.kind == "delay":
        await asyncio.sleep(action.sleep_ms / 1000)
    else:
        _act(name, action)


def _due(name: str) -> _Action | None:
    """The action of ``name`` if it acts on this hit (counted here)."""
    if not _ACTIVE:
        return None
    action = _ACTIVE.get(name)
    if action is None:
        return None
    with _LOCK:
        action.hits += 1
        if action.nth is not None and action.hits != action.nth:
            return None
        if action.probability is not None and _RANDOM.random() >= action.probability:
            return None
    return action


def _act(name: str, action: _Action) -> None:
    if action.kind == "crash":
        print(f"berth: failpoint {name}: crashing", file=sys.stderr, flush=True)
        os._exit(CRASH_STATUS)
    elif action.kind == "sleep" and action.until:
        _waiting(name, action.until)
        while not os.path.exists(action.until):
            time.sleep(UNTIL_POLL_S)
    elif action.kind == "sleep":
        time.sleep(action.sleep_ms / 1000)
    elif action.kind == "error":
        raise FailpointError(f"failpoint {name}")


def _waiting(name: str, until: str) -> None:
    print(f"berth: failpoint {name}: waiting for {until}", file=sys.stderr, flush=True)


configure()
