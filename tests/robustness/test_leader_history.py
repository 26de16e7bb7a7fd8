"""The leadership checker (``support.leader_history``) on histories written by hand: what the API server's audit log
and the coordinator's journal would hold, with the violations it must find and the ones it must not invent."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from support.leader_history import (
    Term,
    Write,
    apiserver_writes,
    batch_leaves,
    check,
    coordinator_writes,
    last_held,
    lease_terms,
    taken_on_release,
    takeover,
)

NS, LEASE = "berth-robust", "robust-operator"


def at(seconds: float) -> str:
    return datetime.fromtimestamp(1_800_000_000 + seconds, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def lease_write(seconds: float, writer: str, holder: str, code: int = 200, verb: str = "update") -> dict[str, Any]:
    return {
        "stage": "ResponseComplete",
        "verb": verb,
        "userAgent": f"berth-operator/0.1.0 ({writer})",
        "objectRef": {"resource": "leases", "namespace": NS, "name": LEASE},
        "requestObject": {"spec": {"holderIdentity": holder or None}},
        "responseStatus": {"code": code},
        "requestReceivedTimestamp": at(seconds),
        "stageTimestamp": at(seconds + 0.003),
    }


def api_write(seconds: float, writer: str, resource: str = "statefulsets", verb: str = "patch") -> dict[str, Any]:
    return {
        "stage": "RequestReceived",
        "verb": verb,
        "userAgent": f"berth-operator/0.1.0 ({writer})",
        "objectRef": {"resource": resource, "namespace": NS, "name": "orders"},
        "requestReceivedTimestamp": at(seconds),
    }


def t(seconds: float) -> float:
    return 1_800_000_000 + seconds


def test_terms_come_from_the_lease_writes_that_succeeded_renewals_and_refusals_aside() -> None:
    events = [
        lease_write(0, "a_1", "a_1", 201, "create"),
        lease_write(1, "a_1", "a_1"),  # a renewal
        lease_write(2, "b_2", "b_2", 409),  # refused: b does not hold it
        lease_write(6, "b_2", "b_2"),  # b takes it over
        lease_write(7, "b_2", ""),  # b releases it
        lease_write(7.5, "c_3", "c_3"),
        api_write(3, "a_1"),  # not a Lease write
    ]
    terms = lease_terms(events, NS, LEASE)
    assert [(x.holder, round(x.started - t(0), 3), x.released_by) for x in terms] == [
        ("a_1", 0, ""),
        ("b_2", 6, ""),
        ("", 7, "b_2"),
        ("c_3", 7.5, ""),
    ]


def test_writes_within_their_own_terms_pass_and_the_margin_is_kept() -> None:
    terms = [Term("a_1", t(0), t(0)), Term("b_2", t(6), t(6))]
    writes = apiserver_writes([api_write(1, "a_1"), api_write(2.5, "a_1"), api_write(6.2, "b_2")], NS, LEASE)
    verdict = check(terms, writes)
    assert verdict.ok and verdict.checked == 3
    assert verdict.margin_s is not None and round(verdict.margin_s, 3) == 3.5


def test_a_write_after_a_newer_leader_took_over_is_a_step_by_a_deposed_leader() -> None:
    terms = [Term("a_1", t(0), t(0)), Term("b_2", t(6), t(6))]
    verdict = check(terms, [Write("a_1", t(6.017), "patch statefulsets/orders", "apiserver")])
    assert [v.rule for v in verdict.violations] == ["step by a deposed leader"]
    assert "0.017 s after b_2 took over" in str(verdict.violations[0])


def test_a_write_after_its_own_release_or_before_any_term_is_reported() -> None:
    terms = [Term("a_1", t(0), t(0)), Term("", t(5), t(5), released_by="a_1")]
    verdict = check(
        terms,
        [
            Write("a_1", t(5.5), "patch consumerfleets/status/orders", "apiserver"),
            Write("c_3", t(1), "create events/", "apiserver"),  # a standby writing
        ],
    )
    rules = sorted(v.rule for v in verdict.violations)
    assert rules == ["step by a deposed leader", "write without the Lease"]


def test_journal_writes_are_read_by_their_actor_and_checked_like_the_api_servers() -> None:
    journal = [
        {"seq": 1, "ts_ms": int(t(1) * 1000), "group_id": "g", "type": "expected_members_changed", "actor": "a"},
        {
            "seq": 2,
            "ts_ms": int(t(7) * 1000),
            "group_id": "g",
            "type": "member_left",
            "via": "admin",
            "actor": "a",
            "group_instance_id": "orders-2",
        },
        {"seq": 3, "ts_ms": int(t(7) * 1000), "group_id": "g", "type": "rebalance_started"},  # no actor: the group's
    ]
    writes = coordinator_writes(journal, {"a": "a_1"})
    assert [w.what for w in writes] == ["coordinator expected_members_changed g", "coordinator member_left g orders-2"]
    verdict = check([Term("a_1", t(0), t(0)), Term("b_2", t(6), t(6))], writes, precision_s=0.001)
    assert [v.rule for v in verdict.violations] == ["step by a deposed leader"]


def test_batch_leaves_group_one_requests_events_and_tell_two_requests_apart() -> None:
    def left(seq: int, ms: int, actor: str, instance: str) -> dict[str, Any]:
        return {"seq": seq, "ts_ms": ms, "group_id": "g", "type": "member_left", "via": "admin", "actor": actor,
                "group_instance_id": instance}  # fmt: skip

    journal = [
        left(10, 5000, "a", "orders-2"),
        left(11, 5000, "a", "orders-3"),
        {"seq": 12, "ts_ms": 5000, "group_id": "g", "type": "rebalance_started"},
        left(13, 9000, "b", "orders-1"),
        {
            "seq": 14,
            "ts_ms": 9000,
            "group_id": "other",
            "type": "member_left",
            "via": "admin",
            "actor": "b",
            "group_instance_id": "x-1",
        },
    ]
    leaves = batch_leaves(journal, "g")
    assert [(x.actor, x.ids) for x in leaves] == [("a", ("orders-2", "orders-3")), ("b", ("orders-1",))]


def test_takeover_is_the_next_other_holder_and_its_first_write_events_aside() -> None:
    terms = [Term("a_1", t(0), t(0)), Term("b_2", t(4.3), t(4.3))]
    writes = [
        Write("b_2", t(4.31), "create events/", "apiserver"),
        Write("b_2", t(5.0), "patch consumerfleets/status/orders", "apiserver"),
    ]
    found = takeover(terms, writes, after=t(0.2), previous="a_1")
    assert found is not None and found.holder == "b_2"
    assert (
        round(found.acquired_s, 3) == 4.1 and found.first_write_s is not None and round(found.first_write_s, 3) == 4.8
    )
    assert takeover(terms, writes, after=t(5), previous="a_1") is None


def test_a_standby_takes_the_lease_on_its_release_or_the_rule_says_it_waited_for_its_expiry() -> None:
    renewals = [lease_write(0, "a_1", "a_1", 201, "create"), lease_write(1, "a_1", "a_1"), lease_write(2, "a_1", "a_1")]
    released = [*renewals, lease_write(5, "a_1", "")]  # a slow shutdown: released 3 s after its last renewal

    def rule(events: list[dict[str, Any]]) -> list[str]:
        return taken_on_release(events, NS, LEASE, "a_1", "b_2", since=t(3), lease_s=4.0)

    assert rule([*released, lease_write(5.2, "b_2", "b_2")]) == []  # on the release
    assert rule([*released, lease_write(6.5, "b_2", "b_2")]) == [
        "b_2 took the Lease 4.5 s after a_1's last renewal: on its expiry (a_1 released it 3.0 s after that renewal,"
        " answered 3.0 s after)"
    ]
    assert rule([*renewals, lease_write(6.5, "b_2", "b_2")]) == ["a_1 never released the Lease"]
    assert rule(released) == ["b_2 never took the Lease after a_1 released it"]
    assert last_held(released, NS, LEASE, "a_1", before=t(5)) == t(2)
    assert last_held(released, NS, LEASE, "a_1", before=t(0)) is None
