"""What a history's signals must agree with: the coordinator's journal (or, on Kafka, the broker's group as its
members saw it) and what the lab itself did to the pods. :func:`wrong_signals` lists every Event, status field or
metric that says something the truth does not; a history is right when the list is empty.

The properties (issue 30, "Every value signal checked against ground truth"):

- **no placeholder**: no Event or condition message carries ``?`` or ``None`` where a value should be;
- **a fleet's own are never foreign**: ``status.foreignMembers`` and ``ForeignMembers`` Events never name an id of a
  pod the fleet ran;
- **the assignment is the members'**: ``status.group.assignment`` names only members of the group
  (``status.group.members``: a pod gone keeps no partitions there);
- **removed is what was removed**: every ``lastScaleDown.removed`` id left the group by the operator's batch leave
  at that moment (a ``member_left via admin`` in the journal), every such leave is in a ``lastScaleDown``, results
  say NONE exactly for them, and without ``leaveOnScaleDown`` nothing is said removed;
- **restarts are what restarted**: ``status.restarts.static`` and ``rebalancing`` are the journal's static
  replacements of the fleet's ids (without, and with, a rebalance); ``expired`` counts only expiries of pods the lab
  restarted (never a pod a scale-down removed);
- **a burst is charged only what it caused**: each ``Restarted`` Event agrees with ``status.restarts.last`` and
  charges no more rebalances than the journal shows caused by the pods the lab restarted (the rebalance right after
  such a pod's return with new metadata, its expiry, or its return after expiring) within the burst;
- **the metrics agree**: members left with the journal's admin removals, static restarts and rolls with status,
  departing and ready with status;
- **a scale-down's rebalances are counted from where the leave was**: ``lastScaleDown.fromGeneration`` is the
  group's generation when its leave removed the members;
- **no pass fails** (the lab's coordinator and workload never fail a call), and the fleet comes to rest — on Kafka,
  unless the broker's own group never settled (a consumer-protocol group left Reconciling by its clients);
- **Ready is not claimed over a rebalance**: the last status does not say Ready when the broker's group was
  rebalancing all through the last pass (described rebalancing before the pass began and again after it ended, at the
  same generation: it never settled in between);

On Kafka the truth is sampled (``Record.sampled``: the broker's answers to the operator's removals and its group
described every 150 ms, ``signal_kafka_rig``) and the lab runs on the wall clock, so three checks are bounds there: the
operator's static restarts are at most the times the broker showed one of the fleet's ids under a new member id (a
pass sees only what changed since the last pass); a removal belongs to the ``lastScaleDown`` whose ``at`` is up to
6 s before it (the pass that made it, on a busy machine); and ``fromGeneration`` is not checked (the removals carry
no generation: classic groups describe none).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from support.signal_lab import NEVER_RESTED, Record

#: Why a pod's process stopped that makes its return a restart (the pod stays in the fleet).
RESTARTED = frozenset({"deleted", "evicted", "crashed", "rolled"})
#: A placeholder where a value should be.
PLACEHOLDER = re.compile(r"\?|\bNone\b")


def wrong_signals(record: Record) -> list[str]:
    checks = (
        no_placeholders,
        foreign_never_own,
        assignment_of_members_only,
        ready_not_claimed,
        removed_is_what_was_removed,
        restarts_are_what_restarted,
        bursts_charged_only_what_they_caused,
        metrics_agree,
        scale_down_generations,
    )
    wrong = [f"a pass failed: {failure}" for failure in record.failures if not _broker_never_settled(record, failure)]
    for check in checks:
        wrong += check(record)
    return wrong


def _broker_never_settled(record: Record, failure: str) -> bool:
    """A fleet that never came to rest because the broker's own group never settled (a sampled truth that ends
    rebalancing) is not the operator's doing, provided its status does not say Ready (:func:`ready_not_claimed`)."""
    return record.unsettled is not None and failure.startswith(NEVER_RESTED)


def ready_not_claimed(record: Record) -> list[str]:
    """The group as described last before the pass began and first after it ended: a rebalance the pass could have
    missed (one that began or ended while it ran) is not one it ran all through."""
    conditions = record.status.get("conditions") or ()
    ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)
    if not ready or record.last_pass is None:
        return []
    began, ended = record.last_pass
    before = [look for look in record.looks if look.answered_ms <= began]
    after = [look for look in record.looks if look.asked_ms >= ended]
    if not before or not after:
        return []
    was, then = before[-1], after[0]
    if not was.settled and not then.settled and was.generation == then.generation:
        return [
            f"status says Ready though the broker's group was rebalancing all through the last pass"
            f" ({was.state} at generation {was.generation} before it, {then.state} after it)"
        ]
    return []


def created(record: Record) -> set[str]:
    return {happened.pod for happened in record.log}


def no_placeholders(record: Record) -> list[str]:
    wrong = [f"Event {s.reason} has a placeholder: {s.message!r}" for s in record.said if PLACEHOLDER.search(s.message)]
    for _, status in record.statuses:
        for condition in status.get("conditions") or ():
            if PLACEHOLDER.search(str(condition.get("message", ""))):
                wrong.append(f"condition {condition['type']} has a placeholder: {condition['message']!r}")
    return sorted(set(wrong))


def foreign_never_own(record: Record) -> list[str]:
    own = created(record)
    wrong = set()
    for at, status in record.statuses:
        named = own & set(status.get("foreignMembers") or ())
        if named:
            wrong.add(f"status.foreignMembers names the fleet's own {sorted(named)} (at {at})")
    for said in record.said:
        if said.reason == "ForeignMembers":
            named = {pod for pod in own if re.search(rf"\b{re.escape(pod)}\b", said.message)}
            if named:
                wrong.add(f"ForeignMembers Event names the fleet's own {sorted(named)}: {said.message!r}")
    return sorted(wrong)


def assignment_of_members_only(record: Record) -> list[str]:
    wrong = set()
    for at, status in record.statuses:
        group = status.get("group") or {}
        stale = sorted(set(group.get("assignment") or {}) - set(group.get("members") or ()))
        if stale:
            wrong.add(f"status.group.assignment names {stale}, not members of the group (at {at})")
    return sorted(wrong)


def _records_of_scale_downs(record: Record) -> dict[str, Mapping[str, Any]]:
    """Each lastScaleDown seen, by its ``at``, as last seen (the rebalances are added to it later)."""
    found: dict[str, Mapping[str, Any]] = {}
    for _, status in record.statuses:
        last = status.get("lastScaleDown")
        if isinstance(last, Mapping) and last.get("at"):
            found[str(last["at"])] = last
    return found


def _ms(at: str) -> int:
    from datetime import datetime

    return int(datetime.fromisoformat(at.replace("Z", "+00:00")).timestamp() * 1000)


def _at_the_leave(record: Record, at_ms: int, ts_ms: int) -> bool:
    """Whether a removal at ``ts_ms`` is the one of the lastScaleDown whose ``at`` (seconds precision) is ``at_ms``:
    within its second on the coordinator's manual clock; on the wall clock (a sampled truth), within the pass that
    made it, which takes up to seconds on a busy machine."""
    late_ms = 6_000 if record.sampled else 1_100
    return at_ms - 100 <= ts_ms < at_ms + late_ms


def removed_is_what_was_removed(record: Record) -> list[str]:
    wrong = []
    admin = [e for e in record.truth if e["type"] == "member_left" and e.get("via") == "admin"]
    said = _records_of_scale_downs(record)
    for at, last in said.items():
        at_ms = _ms(at)
        removed = list(last.get("removed") or ())
        results = dict(last.get("results") or {})
        if not record.history.leave_on_scale_down and (removed or results):
            wrong.append(f"lastScaleDown at {at} says {removed} removed ({results}) though no leave is sent")
        for instance_id in removed:
            if not any(
                e["group_instance_id"] == instance_id and _at_the_leave(record, at_ms, e["ts_ms"]) for e in admin
            ):
                wrong.append(f"lastScaleDown at {at} says {instance_id} removed: the journal shows no such leave")
        none = sorted(i for i, outcome in results.items() if outcome == "NONE")
        if none != sorted(removed):
            wrong.append(f"lastScaleDown at {at}: removed {removed} but results NONE for {none}")
        expiring = set(last.get("expiring") or ())
        if expiring & set(removed) or not expiring <= created(record):
            wrong.append(f"lastScaleDown at {at}: expiring {sorted(expiring)} (removed {removed})")
    for event in admin:
        seen = any(
            event["group_instance_id"] in (last.get("removed") or ()) and _at_the_leave(record, _ms(at), event["ts_ms"])
            for at, last in said.items()
        )
        if not seen:
            wrong.append(f"the leave of {event['group_instance_id']} at {event['ts_ms']} is in no lastScaleDown")
    return wrong


def _stops(record: Record) -> dict[str, list[tuple[int, str]]]:
    stops: dict[str, list[tuple[int, str]]] = {}
    for happened in record.log:
        if happened.what == "stopped":
            stops.setdefault(happened.pod, []).append((happened.at_ms, happened.why))
    return stops


def _restarted_before(record: Record, pod: str | None, ts_ms: int) -> bool:
    """Whether ``pod``'s last process stop before ``ts_ms`` was one after which the pod stays (a restart)."""
    before = [why for at, why in _stops(record).get(pod or "", []) if at <= ts_ms]
    return bool(before) and before[-1] in RESTARTED


def _replicas_at(record: Record, ts_ms: int) -> int:
    return [n for since, n in record.replicas if since <= ts_ms][-1]


def restarts_are_what_restarted(record: Record) -> list[str]:
    block = record.status.get("restarts") or {}
    own = created(record)
    replaced = [e for e in record.truth if e["type"] == "static_member_replaced" and e["group_instance_id"] in own]
    static = sum(1 for e in replaced if not e.get("rebalance"))
    rebalancing = sum(1 for e in replaced if e.get("rebalance"))
    expiries = [
        e
        for e in record.truth
        if e["type"] == "member_expired" and e.get("phase") == "session" and e.get("group_instance_id") in own
    ]
    restarted = sum(1 for e in expiries if _restarted_before(record, e["group_instance_id"], e["ts_ms"]))
    wrong = []
    if record.sampled:
        # A pass sees a restart as an instance id under a new member id since the last pass: at most as many as the
        # broker showed, counting a member that expired and came back between two passes (which a pass cannot tell
        # from a static restart).
        counted = (block.get("static") or 0) + (block.get("rebalancing") or 0)
        changes = _member_id_changes(record, own)
        if counted > changes:
            wrong.append(
                f"status.restarts static {block.get('static')}, rebalancing {block.get('rebalancing')}: the broker"
                f" showed the fleet's instance ids under a new member id {changes} times"
            )
    elif (block.get("static"), block.get("rebalancing")) != (static, rebalancing):
        wrong.append(
            f"status.restarts static {block.get('static')}, rebalancing {block.get('rebalancing')}: the journal shows"
            f" {static} static replacements and {rebalancing} with a rebalance"
        )
    if (block.get("expired") or 0) > restarted:
        wrong.append(
            f"status.restarts.expired {block.get('expired')}: only {restarted} of the {len(expiries)} expiries in the"
            " journal are of pods that restarted"
        )
    return wrong


def _member_id_changes(record: Record, own: set[str]) -> int:
    """How often one of ``own`` instance ids came back under a new member id: a static replacement, or a join after
    it had been a member before (it expired, or was removed, meanwhile)."""
    seen: set[str] = set()
    changes = 0
    for event in record.truth:
        instance_id = event.get("group_instance_id")
        if instance_id not in own or event["type"] not in ("member_joined", "static_member_replaced"):
            continue
        changes += event["type"] == "static_member_replaced" or instance_id in seen
        seen.add(instance_id)
    return changes


def _caused_by_restarts(record: Record, start_ms: int, end_ms: int) -> int:
    """The journal's rebalances in [start, end] right after an event of a pod the lab restarted: its return with a
    rebalance, its expiry, or its return as a new member after expiring."""
    count = 0
    previous: dict[str, Any] | None = None
    expired: set[str] = set()
    for event in record.truth:
        pod = event.get("group_instance_id")
        if event["type"] == "member_expired" and pod:
            expired.add(pod)
        if event["type"] == "rebalance_started" and previous is not None and start_ms <= event["ts_ms"] <= end_ms:
            by = previous.get("group_instance_id")
            kind = previous["type"]
            caused = (
                (kind == "static_member_replaced" and previous.get("rebalance"))
                or kind == "member_expired"
                or (kind == "member_joined" and by in expired)
            )
            if caused and _restarted_before(record, by, event["ts_ms"]):
                count += 1
        previous = event
    return count


def _numbers(message: str) -> tuple[int, int, int]:
    """(restarts, static, rebalances) of a Restarted message."""
    plain = re.fullmatch(r"(\d+) pods? restarted statically(?: \(rollout\))?, (\d+) rebalances?", message)
    if plain:
        return int(plain.group(1)), int(plain.group(1)), int(plain.group(2))
    mixed = re.fullmatch(
        r"(\d+) pod restarts?(?: \(rollout\))?: (\d+) static, (\d+) not \(back after the session timeout, or changed\):"
        r" (\d+) rebalances?",
        message,
    )
    if mixed:
        return int(mixed.group(1)), int(mixed.group(2)), int(mixed.group(4))
    raise AssertionError(f"a Restarted message the oracle cannot read: {message!r}")


def bursts_charged_only_what_they_caused(record: Record) -> list[str]:
    wrong = []
    lasts = []
    for _, status in record.statuses:
        last = (status.get("restarts") or {}).get("last")
        if isinstance(last, Mapping) and (not lasts or lasts[-1] != last):
            lasts.append(dict(last))
    bursts = [s for s in record.said if s.reason == "Restarted"]
    if len(bursts) != len(lasts):
        wrong.append(f"{len(bursts)} Restarted Events for {len(lasts)} bursts in status.restarts.last")
    previous_ms = 0
    for said, last in zip(bursts, lasts, strict=False):
        restarts, static, rebalances = _numbers(said.message)
        if (restarts, static, rebalances) != (last["restarts"], last["static"], last["rebalances"]):
            wrong.append(f"Restarted {said.message!r} but status.restarts.last says {last}")
        # What the burst counted happened after the previous burst was told, and before this one is.
        caused = _caused_by_restarts(record, previous_ms + 1, said.at_ms)
        if rebalances > caused:
            wrong.append(
                f"Restarted {said.message!r} charges {rebalances} rebalances: the journal shows {caused} caused by"
                f" the pods restarted since the previous burst was told"
            )
        previous_ms = said.at_ms
        expected_type = "Normal" if rebalances == 0 else "Warning"
        if said.type != expected_type:
            wrong.append(f"Restarted {said.message!r} is a {said.type} Event")
    return wrong


def metrics_agree(record: Record) -> list[str]:
    status, metrics = record.status, record.metrics
    admin = sum(1 for e in record.truth if e["type"] == "member_left" and e.get("via") == "admin")
    block = status.get("restarts") or {}
    ready = 1.0 if any(c["type"] == "Ready" and c["status"] == "True" for c in status.get("conditions") or ()) else 0.0
    expected = {
        "berth_operator_members_left_total": float(admin),
        "berth_operator_static_restarts_total": float(block.get("static") or 0),
        "berth_operator_rolls_total": float(block.get("rolls") or 0),
        "berth_operator_departing_members": float(len(status.get("departing") or ())),
        "berth_operator_fleet_ready": ready,
    }
    return [
        f"metric {name} is {metrics.get(name)}, the truth {value}"
        for name, value in expected.items()
        if metrics.get(name) != value
    ]


def scale_down_generations(record: Record) -> list[str]:
    wrong = []
    admin = [e for e in record.truth if e["type"] == "member_left" and e.get("via") == "admin"]
    for at, last in _records_of_scale_downs(record).items():
        start = last.get("fromGeneration")
        if start is None:
            continue
        at_ms = _ms(at)
        generations = {
            e["generation_id"]
            for e in admin
            if e.get("generation_id") is not None and _at_the_leave(record, at_ms, e["ts_ms"])
        }
        if generations and generations != {start}:
            wrong.append(f"lastScaleDown at {at}: fromGeneration {start}, the leave happened at {sorted(generations)}")
    return wrong


def describe(record: Record, limit: int = 200) -> str:
    """The history, what was said and the journal, for a failure's message."""
    lines = [f"history: {record.history}", "said:"]
    lines += [f"  {s.at_ms} {s.type} {s.reason}: {s.message}" for s in record.said[-40:]]
    lines.append("journal:")
    lines += [f"  {_short(e)}" for e in record.truth[-limit:]]
    lines.append("pods:")
    lines += [f"  {h.at_ms} {h.pod} {h.what} ({h.why})" for h in record.log[-80:]]
    return "\n".join(lines)


def _short(event: Mapping[str, Any]) -> str:
    keep = ("ts_ms", "type", "group_instance_id", "cause", "via", "rebalance", "phase", "generation_id")
    return " ".join(f"{k}={event[k]}" for k in keep if k in event and event[k] is not None)
