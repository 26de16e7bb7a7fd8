"""When a fleet's next pass is due, once a pass has ended: the only clock-driven work of the watching operator.

A change reaches a fleet as a poke: its spec (Kopf's handlers), an object it owns (the watch cache), its group (the
coordinator's journal). What no poke announces is decided here, from how the pass ended:

- **converged**, its group's changes followed (Berth's coordinator with ``--follow-journal``): nothing to do but the
  slow resync (``resync_s``, a safety net for what no watch covers, e.g. a Secret a Kafka fleet names), spread
  over 0.9..1.1 of it by the fleet's name, so a thousand fleets created at once do not resync at once;
- **converged**, its group not followed (Kafka keeps no journal; ``--no-follow-journal``): ``interval_s``, the pace
  at which its status follows the group;
- **waiting** (pods terminating, the StatefulSet acting on a new size): ``poll_s`` while the wait is younger than
  ``settle_s`` (the watch wakes it sooner; this is the backstop, and the clock of the stuck-pod allowance), then
  ``interval_s``;
- **refused**: ``interval_s`` (what fixes a refusal may be no change of the fleet: another fleet letting go of the
  group, a Secret created);
- **failed** (a coordinator or the API could not be asked, or a bug): 1, 2, 4 ... ``backoff_cap_s``.

A pass that found something only time ends (a burst of restarts settling a session timeout after the last one)
names when (``PassResult.again_at``), and the fleet is passed then if that is sooner.

Pure: the caller passes how long the fleet has been waiting and how many passes failed in a row.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from enum import StrEnum


class Outcome(StrEnum):
    CONVERGED = "converged"
    WAITING = "waiting"
    REFUSED = "refused"
    FAILED = "failed"


@dataclass(frozen=True, slots=True)
class PassTiming:
    poll_s: float = 1.0
    settle_s: float = 60.0
    interval_s: float = 10.0
    resync_s: float = 600.0
    backoff_cap_s: float = 60.0


def spread(name: str) -> float:
    """A factor in 0.9..1.1, the same for the same name every time."""
    return 0.9 + 0.2 * (zlib.crc32(name.encode()) % 1000) / 999


def next_pass_in(
    timing: PassTiming, outcome: Outcome, *, name: str, followed: bool, waiting_for_s: float, failures: int
) -> float:
    """Seconds until the fleet ``name``'s next pass (see the module docstring)."""
    if outcome is Outcome.FAILED:
        return float(min(timing.backoff_cap_s, 2 ** min(max(failures, 1) - 1, 6)))
    if outcome is Outcome.WAITING:
        return timing.poll_s if waiting_for_s < timing.settle_s else timing.interval_s
    if outcome is Outcome.REFUSED or not followed:
        return min(timing.interval_s, timing.resync_s)
    return timing.resync_s * spread(name)
