"""The roll pacer (``planners.roll_pacing``): at most ``limit`` fleets roll at once, whose turn is next, rolls that
stop moving, turns freed and offered, and the reservation that keeps passes side by side from overshooting."""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

from test_watch_loop import statefulset

from berth.operator.adapters.kube.watch_cache import STATEFULSETS, WatchCache
from berth.operator.adapters.metrics import OperatorMetrics
from berth.operator.planners.roll_pacing import FleetKey, RollPacer, Turn

A, B, C, D = ("team-a", "a"), ("team-a", "b"), ("team-a", "c"), ("team-a", "d")
OTHER = ("team-b", "x")


class Pacer:
    """A pacer whose calls return the turns they offered (``on_offer``)."""

    def __init__(self, limit: int, **options: Any) -> None:
        self.offers: list[FleetKey] = []
        self.pacer = RollPacer(limit, on_offer=self.offers.extend, **options)

    def _offered(self, before: int) -> list[FleetKey]:
        return self.offers[before:]

    def observed(self, key: FleetKey, rolling: bool, progress: Hashable, now: float) -> list[FleetKey]:
        before = len(self.offers)
        self.pacer.observed(key, rolling, progress, now)
        return self._offered(before)

    def forget(self, key: FleetKey, now: float) -> list[FleetKey]:
        before = len(self.offers)
        self.pacer.forget(key, now)
        return self._offered(before)

    def withdraw(self, key: FleetKey, now: float) -> list[FleetKey]:
        before = len(self.offers)
        self.pacer.withdraw(key, now)
        return self._offered(before)

    def take(self, key: FleetKey, now: float) -> Turn:
        return self.pacer.take(key, now)

    def waiting(self) -> int:
        return self.pacer.waiting()


def rolling(pacer: Pacer, key: tuple[str, str], now: float, step: int = 0) -> list[tuple[str, str]]:
    """The fleet's StatefulSet seen rolling (``step``: how far its roll went)."""
    return pacer.observed(key, True, ("rev-2", step), now)


def test_at_most_limit_fleets_roll_and_the_rest_wait_in_the_order_they_asked() -> None:
    pacer = Pacer(2)
    assert pacer.take(A, 0).admitted and pacer.take(B, 1).admitted
    waiting_c, waiting_d = pacer.take(C, 2), pacer.take(D, 3)
    assert (waiting_c.admitted, waiting_c.rolling, waiting_c.limit, waiting_c.place) == (False, 2, 2, 1)
    assert (waiting_d.admitted, waiting_d.place) == (False, 2)
    assert pacer.take(A, 4).admitted  # a fleet with its turn keeps it when its pass asks again
    assert pacer.waiting() == 2


def test_a_roll_that_ends_frees_its_turn_for_the_first_in_line_who_is_poked() -> None:
    pacer = Pacer(1)
    assert pacer.take(A, 0).admitted
    assert rolling(pacer, A, 1) == []  # the StatefulSet shows A's roll: it counts as itself
    assert not pacer.take(B, 2).admitted and not pacer.take(C, 3).admitted
    assert rolling(pacer, A, 4, step=1) == []  # still rolling: nothing freed
    assert pacer.observed(A, False, ("rev-2", 2), 5) == [B]  # done: B is offered the turn
    assert not pacer.take(C, 6).admitted  # C asks before B's pass: B's place is kept
    assert pacer.take(B, 7).admitted


def test_every_roll_counts_kubectl_rollout_restart_included() -> None:
    pacer = Pacer(1)
    rolling(pacer, OTHER, 0)  # a roll the operator did not start
    assert not pacer.take(A, 1).admitted
    assert pacer.observed(OTHER, False, None, 2) == [A]


def test_a_turn_given_is_reserved_until_the_roll_shows_so_passes_side_by_side_cannot_all_take_the_last_one() -> None:
    pacer = Pacer(1, reservation_s=30)
    assert pacer.take(A, 0).admitted
    assert pacer.observed(A, False, None, 1) == []  # an event before the patch landed: the reservation stays
    assert not pacer.take(B, 2).admitted
    late = pacer.take(B, 31)  # the patch never landed (it failed): the turn goes back after the reservation
    assert late.admitted


def test_a_roll_that_stops_moving_stops_counting_so_a_broken_fleet_holds_no_turn_forever() -> None:
    pacer = Pacer(1, stall_s=600)
    rolling(pacer, A, 0)
    waiting = pacer.take(B, 10)
    assert not waiting.admitted and waiting.recheck_at == 600  # when B looks again by itself
    rolling(pacer, A, 300)  # the same progress seen again: no move
    assert not pacer.take(B, 599).admitted
    assert pacer.take(B, 600).admitted
    rolling(pacer, A, 700, step=1)  # it moves again: it counts again
    assert not pacer.take(C, 701).admitted


def test_a_namespace_takes_more_than_half_the_turns_only_while_no_other_namespace_waits() -> None:
    pacer = Pacer(4)
    for key, now in ((A, 0), (B, 1)):
        assert pacer.take(key, now).admitted
    assert pacer.take(C, 2).admitted  # nobody else waits: team-a may take a third turn
    pacer.take(OTHER, 3)  # admitted: a turn was free
    assert not pacer.take(D, 4).admitted  # full
    for key in (A, B, C, OTHER):
        rolling(pacer, key, 5)
    team_b_next = ("team-b", "y")
    assert not pacer.take(team_b_next, 6).admitted
    assert pacer.observed(A, False, None, 7) == [team_b_next]  # fewer rolls in its namespace: first in line
    assert not pacer.take(D, 8).admitted  # team-a holds its half while team-b waits
    assert pacer.take(team_b_next, 9).admitted


def test_a_fleet_that_no_longer_needs_a_turn_leaves_the_line_and_a_gone_one_frees_its_own() -> None:
    pacer = Pacer(1)
    rolling(pacer, A, 0)
    pacer.take(B, 1)
    pacer.take(C, 2)
    assert pacer.withdraw(B, 3) == []  # no turn free: nobody offered one
    assert pacer.take(C, 3).place == 1
    assert pacer.forget(A, 4) == [C]


def test_a_fleet_offered_a_turn_that_leaves_the_line_passes_it_on() -> None:
    """A paused or refused fleet leaves the line; the turn it was offered goes to the next in line at once."""
    pacer = Pacer(1)
    rolling(pacer, A, 0)
    pacer.take(B, 1)
    pacer.take(C, 2)
    assert pacer.observed(A, False, None, 3) == [B]
    assert pacer.withdraw(B, 4) == [C]
    assert pacer.take(C, 5).admitted


def test_limit_zero_admits_every_roll_at_once() -> None:
    pacer = Pacer(0)
    for i in range(100):
        rolling(pacer, ("ns", f"f{i}"), 0)
    assert pacer.take(A, 1).admitted
    assert pacer.observed(("ns", "f0"), False, None, 2) == []


def test_a_statefulset_at_rest_costs_no_count() -> None:
    pacer = Pacer(1)
    assert pacer.observed(A, False, None, 0) == []
    assert pacer.take(B, 1).admitted


def test_the_watch_cache_counts_a_statefulsets_roll_and_its_end_offers_the_turn_to_the_waiting_fleet() -> None:
    """The adapter side: the StatefulSet informer's events tell the pacer (a roll the operator did not start
    counts, until its controller says it is done: every pod updated and Ready), and the turn its end frees is offered
    to the waiting fleet."""
    pacer = Pacer(1)
    cache = WatchCache(
        None,  # type: ignore[arg-type]
        namespace="shop",
        on_fleet_change=lambda namespace, fleet, kind, moved: None,
        rolls=pacer.pacer,
        clock=lambda: 0.0,
    )
    statefulsets = cache.informers[STATEFULSETS]
    statefulsets.handle({"type": "ADDED", "object": statefulset("1")})
    rolling_out = statefulset("2", updateRevision="r2", updatedReplicas=0)  # kubectl rollout restart, say
    statefulsets.handle({"type": "MODIFIED", "object": rolling_out})
    assert not pacer.take(("shop", "billing"), 1).admitted
    assert pacer.offers == []
    # Every pod replaced, the last not Ready yet: its controller keeps the old current revision, and the roll counts.
    statefulsets.handle({"type": "MODIFIED", "object": statefulset("3", updateRevision="r2", updatedReplicas=1)})
    assert pacer.offers == []

    statefulsets.handle({"type": "MODIFIED", "object": statefulset("4", updateRevision="r2", currentRevision="r2")})

    assert pacer.offers == [("shop", "billing")]
    assert pacer.take(("shop", "billing"), 2).admitted


def test_the_counts_are_told_as_they_move_and_the_metrics_show_them() -> None:
    metrics = OperatorMetrics()
    told: list[tuple[int, int]] = []

    def counted(in_progress: int, waiting: int) -> None:
        told.append((in_progress, waiting))
        metrics.rolls_counted(in_progress, waiting)

    pacer = RollPacer(1, on_counts=counted)
    assert pacer.take(A, 0).admitted
    assert not pacer.take(B, 1).admitted
    pacer.observed(A, True, ("rev-2", 0), 2)
    text = metrics.exposition().decode()
    assert "berth_operator_rolls_in_progress 1.0" in text and "berth_operator_rolls_waiting 1.0" in text
    pacer.observed(A, False, None, 3)
    assert told == [(1, 0), (1, 1), (1, 1), (0, 1)]
    assert pacer.take(B, 4).admitted and told[-1] == (1, 0)
