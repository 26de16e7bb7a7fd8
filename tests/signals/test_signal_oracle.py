"""The oracle's check that Ready is not claimed over a rebalance (``signal_oracle.ready_not_claimed``), on records
made by hand: the broker's group as described before and after the last pass, against the status that pass wrote.

Regression (CI, stop 36): group k13's last pass described the group Stable with every member and wrote Ready, while
the rig's watch had last described it PreparingRebalance, shortly before the pass; the oracle compared the status
with that stale description and called Ready wrong. Only a rebalance the pass ran all through makes Ready wrong.
"""

from __future__ import annotations

from support.signal_lab import History, Look, Record
from support.signal_oracle import ready_not_claimed

READY = {"conditions": [{"type": "Ready", "status": "True", "reason": "GroupStable"}]}
NOT_READY = {"conditions": [{"type": "Ready", "status": "False", "reason": "GroupRebalancing"}]}
PASS = (10_000, 10_400)  # when the last pass began and ended


def record(status: dict[str, object], *looks: Look) -> Record:
    history = History(replicas=3, leave_on_scale_down=True, pre_register=True, ordered_ready=False, steps=())
    return Record("k13", "k13", history, statuses=[(PASS[1], status)], last_pass=PASS, looks=list(looks))


def look(asked_ms: int, state: str, generation: int) -> Look:
    return Look(asked_ms, asked_ms + 20, state, generation)


def test_ready_over_a_rebalance_the_last_pass_ran_all_through_is_wrong() -> None:
    found = ready_not_claimed(
        record(READY, look(9_800, "PreparingRebalance", 4), look(10_450, "PreparingRebalance", 4))
    )
    assert found == [
        "status says Ready though the broker's group was rebalancing all through the last pass"
        " (PreparingRebalance at generation 4 before it, PreparingRebalance after it)"
    ]


def test_ready_after_a_rebalance_that_ended_while_the_pass_ran_is_right() -> None:
    """The k13 regression: rebalancing before the pass, Stable at a new generation after it."""
    assert ready_not_claimed(record(READY, look(9_800, "PreparingRebalance", 4), look(10_450, "Stable", 5))) == []


def test_ready_before_a_rebalance_that_began_while_the_pass_ran_is_right() -> None:
    assert ready_not_claimed(record(READY, look(9_800, "Stable", 4), look(10_450, "PreparingRebalance", 4))) == []


def test_two_rebalances_with_a_settled_group_between_them_are_not_one() -> None:
    before, after = look(9_800, "PreparingRebalance", 4), look(10_450, "PreparingRebalance", 5)
    assert ready_not_claimed(record(READY, before, after)) == []


def test_a_description_answered_during_the_pass_is_not_before_it() -> None:
    """Asked before the pass began but answered after: it may describe the group after the pass's own look."""
    during = Look(9_990, 10_100, "PreparingRebalance", 4)
    assert (
        ready_not_claimed(record(READY, look(9_700, "Stable", 4), during, look(10_450, "PreparingRebalance", 4))) == []
    )


def test_not_ready_over_a_rebalance_is_right() -> None:
    found = ready_not_claimed(record(NOT_READY, look(9_800, "CompletingRebalance", 4), look(10_450, "Reconciling", 4)))
    assert found == []
