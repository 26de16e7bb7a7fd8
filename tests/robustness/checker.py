"""The offline checker: a run's history held against the models and invariants of docs/api.md.

``check(history, plan)`` returns a ``Report``: the violations found (each says which operations show it) and how
many operations were checked. What it checks:

- **linearizable registers**: each (group, topic, partition)'s committed offset, and each admin group's expected
  members, owner and existence (``models``), by a Wing-Gong search per key (``wgl``). This is also how "no answer
  shows state that was never durable" is caught: a read (or a success that changed nothing, or a refusal) that
  showed a value no acknowledged or indeterminate write explains, or a value that a later read contradicts;
- **generations never go back** in a group: an answer that showed generation g, given after another had shown a
  higher one had completed (joins, syncs, heartbeats and commits answered NONE) — within one incarnation of the
  group. A group the plan keeps nothing of (no offsets, owner or expected members) is deleted once Empty at the
  next expiry check (docs/api.md §12) and made again by the next join, from generation 1: a new dynamic member's
  join answered generation 1, after the group had shown a generation, begins its next incarnation, and no member
  id of an earlier one is answered NONE once that join completed;
- **one owner per partition per generation** (of an incarnation): the assignments handed out by syncs of one
  generation are disjoint
  (an owner is a static member's instance id, whatever its member id: a static member restarted within its session
  timeout takes its assignment over under a new member id, in the same generation; a dynamic member's member id);
- **no rebalance of a fixed static group** (``plan.fixed_static``): once formed, its generation never changes,
  since its members only restart within their session timeout and nothing else changes; but for Kafka's one
  exception, which Berth keeps: an incarnation replaced after its join and before its sync may cost one rebalance
  (the sync timeout; ``_replaced_before_sync``);
- **fenced and removed member ids stay out**: once a static member's instance was taken over by a new member id
  (a join answered NONE), or a member left (a leave answered NONE), no request of the old id sent afterwards is
  answered NONE;
- **readiness tells the truth** (``plan.probes``): the coordinator that should act is not ready 200 while every
  probe commit sent to it has been refused for ``REFUSED_WINDOW_NS``;
- **no process died unasked** (``plan.unexpected_exits``).

What is an answer: HTTP 200 with its in-band error, or a 409 GROUP_OWNED refusal. Anything else (a timeout, a reset,
a 5xx) is indeterminate. COORDINATOR_NOT_AVAILABLE (15) is indeterminate too: a write may have been made durable
although its answer could not be released. LOAD_IN_PROGRESS (14) and NOT_COORDINATOR (16) are refusals: nothing
was done. Operations with other errors did not take effect and are left out of the registers.
"""

from __future__ import annotations

import base64
import json
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from robustness import models, wgl
from robustness.history import History, Op

INDETERMINATE_ERRORS = {15}
#: States one key's search may visit before it is reported undecided.
SEARCH_BUDGET = 500_000
REFUSALS = {14, 16}
#: How long every direct write to a replica must have been refused before a 200 ``/readyz`` from it is a lie.
REFUSED_WINDOW_NS = 1_500_000_000


@dataclass
class Plan:
    """What the run knew that the history alone does not say."""

    fixed_static: set[str] = field(default_factory=set)  # groups whose membership never changes after forming
    admin_groups: set[str] = field(default_factory=set)  # owners, expected members and existence (``admin_group``)
    registers: set[str] = field(default_factory=set)  # groups whose expected members are a plain register
    offset_keys: dict[str, set[tuple[str, int]]] = field(default_factory=dict)  # group -> the keys its loads use
    probes: dict[str, list[tuple[int, int, str]]] = field(default_factory=dict)  # replica -> (invoke, complete, kind)
    unexpected_exits: list[str] = field(default_factory=list)

    @classmethod
    def read(cls, path: Path) -> Plan:
        """A plan as a run keeps it (``plan.json``, beside its history)."""
        data = json.loads(path.read_text())
        return cls(
            set(data["fixed_static"]),
            set(data["admin_groups"]),
            set(data["registers"]),
            {group: {(t, p) for t, p in keys} for group, keys in data["offset_keys"].items()},
            {name: [(i, c, k) for i, c, k in seen] for name, seen in data["probes"].items()},
            list(data["unexpected_exits"]),
        )


@dataclass
class Violation:
    kind: str
    message: str
    ops: list[int] = field(default_factory=list)  # history indexes

    def __str__(self) -> str:
        return f"{self.kind}: {self.message}"


@dataclass
class Report:
    violations: list[Violation]
    operations_checked: int
    keys_checked: int

    @property
    def ok(self) -> bool:
        return not self.violations


def check(history: History, plan: Plan) -> Report:
    violations: list[Violation] = []
    ops = [op for op in history if op.answer is not None or op.status == 0]
    registers = list(_offset_keys(ops, plan)) + list(_expected_keys(ops, plan)) + list(_admin_keys(ops, plan))
    for kind, key, entries, model in registers:
        verdict = wgl.check(entries, model, SEARCH_BUDGET)
        if not verdict.ok:
            violations.append(_not_linearizable(kind, key, verdict))
    incarnations, stale = _incarnations(ops, plan)
    violations += stale
    violations += _generations_go_forward(ops, incarnations)
    violations += _assignments_disjoint(ops, incarnations)
    violations += _fixed_static_groups_do_not_rebalance(ops, plan.fixed_static)
    violations += _old_member_ids_stay_out(ops)
    violations += _readiness_honest(plan.probes)
    violations += [Violation("process", exit_) for exit_ in plan.unexpected_exits]
    return Report(violations, len(history), len(registers))


# ----------------------------------------------------------------------------------------------- helpers


def _code(op: Op) -> int | None:
    if op.answer is None:
        return None
    return int(op.answer.get("error_code", 0))


def _entry(op: Op, what: Any, *, determinate: bool) -> wgl.Entry:
    return wgl.Entry(op.index, op.invoke_ns, op.complete_ns if determinate else None, what)


def _not_linearizable(kind: str, key: str, verdict: wgl.Verdict) -> Violation:
    if verdict.exhausted:
        return Violation(kind, f"{key}: undecided after {verdict.explored} states (too hard to search)")
    shown = "; ".join(f"#{e.id} {e.op}" for e in verdict.blocked[:6])
    tail = "; ".join(f"#{e.id} {e.op}" for e in verdict.longest[-4:])
    return Violation(
        kind,
        f"{key}: not linearizable: after [... {tail}] none of these can come next: {shown}",
        [e.id for e in verdict.blocked],
    )


def _partitions(op: Op, field_: str = "topics") -> Iterable[tuple[str, dict[str, Any]]]:
    source = op.answer if field_ == "answer" else op.request
    for topic in (source or {}).get("topics", []):
        for partition in topic.get("partitions", []):
            yield topic["name"], partition


# ----------------------------------------------------------------------------------------------- offsets


def _offset_keys(ops: list[Op], plan: Plan) -> Iterable[tuple[str, str, list[wgl.Entry], wgl.Model[Any]]]:
    by_key: dict[tuple[str, str, int], list[wgl.Entry]] = defaultdict(list)
    for op in ops:
        if op.group not in plan.offset_keys:
            continue
        if op.what == "commit":
            answered = {(t, p["partition_index"]): p.get("error_code", 0) for t, p in _partitions(op, "answer")}
            for topic, partition in _partitions(op):
                key = (op.group, topic, partition["partition_index"])
                code = answered.get((topic, key[2])) if op.answer is not None else None
                if code is not None and code not in INDETERMINATE_ERRORS and code != 0:
                    continue  # refused: it did not happen
                write = ("write", partition["committed_offset"])
                by_key[key].append(_entry(op, write, determinate=code == 0))
        elif op.what == "fetch" and _code(op) == 0:
            seen = {(t, p["partition_index"]): p["committed_offset"] for t, p in _partitions(op, "answer")}
            for topic, partition in plan.offset_keys[op.group]:
                if op.request.get("topics") and topic not in op.request["topics"]:
                    continue
                value = seen.get((topic, partition), -1)
                read = ("read", None if value == -1 else value)
                by_key[(op.group, topic, partition)].append(_entry(op, read, determinate=True))
    for (group, topic, partition), entries in by_key.items():
        yield "offsets", f"offset {group}/{topic}/{partition}", _prune_unseen_writes(entries), models.register(None)


def _prune_unseen_writes(entries: list[wgl.Entry]) -> list[wgl.Entry]:
    """Indeterminate writes of values no read saw cannot explain anything: leaving them out keeps the search small."""
    seen = {e.op[1] for e in entries if e.op[0] == "read"}
    return [e for e in entries if e.complete is not None or e.op[0] != "write" or e.op[1] in seen]


# ------------------------------------------------------------------------------------- expected members


def _expected_keys(ops: list[Op], plan: Plan) -> Iterable[tuple[str, str, list[wgl.Entry], wgl.Model[Any]]]:
    by_group: dict[str, list[wgl.Entry]] = defaultdict(list)
    for op in ops:
        if op.group not in plan.registers or op.what != "expected":
            continue
        code = _code(op)
        if code in REFUSALS or (code is not None and code != 0 and code not in INDETERMINATE_ERRORS):
            continue
        determinate = code == 0
        if op.method == "GET":
            if determinate and op.answer is not None:
                by_group[op.group].append(
                    _entry(op, ("read", tuple(op.answer["group_instance_ids"])), determinate=True)
                )
            continue
        ids = () if op.method == "DELETE" else tuple(dict.fromkeys(op.request.get("group_instance_ids", ())))
        by_group[op.group].append(_entry(op, ("write", ids), determinate=determinate))
    for group, entries in by_group.items():
        yield "expected", f"expected members of {group}", _prune_unseen_writes(entries), models.register(())


# ------------------------------------------------------------------------------------------ admin groups


def _owner_uid(value: Any) -> str | None:
    return value.get("uid") if isinstance(value, dict) else None


def _admin_op(op: Op) -> models.AdminOp | None:
    """The model's view of an admin operation, or None when it did not happen (refused in another way)."""
    uid = op.headers.get("Berth-Owner-Uid")
    answer: tuple[object, ...] | None
    if op.answer is None or _code(op) in INDETERMINATE_ERRORS:
        answer = None
    elif op.status == 409:
        answer = ("owned", _owner_uid(op.answer.get("owner")))
    elif _code(op) in REFUSALS:
        return None
    else:
        answer = ("ok",)
    body = op.answer or {}
    if op.what == "expected":
        if op.method == "GET":
            if answer is None:
                return None
            return models.AdminOp("get_expected", answer=(*answer, tuple(body.get("group_instance_ids", ()))))
        ids = () if op.method == "DELETE" else tuple(op.request.get("group_instance_ids", ()))
        if answer is not None and answer[0] == "ok":
            answer = ("ok", tuple(body.get("group_instance_ids", ())))
        return models.AdminOp("put_expected", uid, ids, answer)
    if op.what == "owner":
        uid = op.request.get("uid") or parse_qs(urlsplit(op.path).query).get("uid", [uid])[0]
        return models.AdminOp("claim" if op.method == "PUT" else "release", uid, answer=answer)
    if op.what == "delete":
        if answer is not None and body.get("error") == "GROUP_ID_NOT_FOUND":
            answer = ("not_found",)
        elif answer is not None and answer[0] == "ok" and _code(op) != 0:
            return None
        return models.AdminOp("delete", uid, answer=answer)
    if op.what == "describe" and answer is not None:
        exists = body.get("group_state") not in ("Dead", None)
        return models.AdminOp("describe", answer=("ok", (exists, _owner_uid(body.get("owner")))))
    return None


def _admin_keys(ops: list[Op], plan: Plan) -> Iterable[tuple[str, str, list[wgl.Entry], wgl.Model[Any]]]:
    by_group: dict[str, list[wgl.Entry]] = defaultdict(list)
    for op in ops:
        if op.group in plan.admin_groups and (modelled := _admin_op(op)) is not None:
            by_group[op.group].append(_entry(op, modelled, determinate=modelled.answer is not None))
    for group, entries in by_group.items():
        yield "admin", f"group {group}", entries, models.admin_group()


# --------------------------------------------------------------------------------------------- membership


def _generation_seen(op: Op) -> int | None:
    """The generation an answer NONE showed to be the group's, or None."""
    if _code(op) != 0:
        return None
    if op.what == "join":
        return int(op.answer["generation_id"]) if op.answer else None
    if op.what in ("sync", "heartbeat"):
        return int(op.request["generation_id"])
    if op.what == "commit" and int(op.request.get("generation_id", -1)) >= 0:
        codes = [p.get("error_code", 0) for _, p in _partitions(op, "answer")]
        return int(op.request["generation_id"]) if codes and all(c == 0 for c in codes) else None
    return None


def _deletable(group: str, plan: Plan) -> bool:
    """Whether the group may be deleted by expiry during a run: it holds nothing the plan's loads keep."""
    kept = plan.fixed_static | plan.admin_groups | plan.registers | set(plan.offset_keys)
    return group not in kept


def _incarnations(ops: list[Op], plan: Plan) -> tuple[dict[int, int], list[Violation]]:
    """Each op that showed a generation -> the incarnation of its group it belongs to (0, 1, ...); and the answers
    NONE to a member id of an earlier incarnation sent after the next one had begun (its first join completed)."""
    of_op: dict[int, int] = {}
    found: list[Violation] = []
    by_group: dict[str, list[tuple[Op, int]]] = defaultdict(list)
    for op in ops:
        if (generation := _generation_seen(op)) is not None:
            by_group[op.group].append((op, generation))
    for group, seen in by_group.items():
        member_of: dict[str, int] = {}  # member id -> its incarnation
        began: list[Op] = []  # the join that began each incarnation after the first
        earliest_done: int | None = None  # the first completion among the current incarnation's ops
        for op, generation in sorted(seen, key=lambda s: s[0].invoke_ns):
            member = str(op.request.get("member_id") or "")
            new_member = member not in member_of
            if (
                op.what == "join"
                and generation == 1
                and new_member
                and not op.request.get("group_instance_id")
                and _deletable(group, plan)
                and earliest_done is not None
                and earliest_done < op.invoke_ns
            ):
                began.append(op)
                earliest_done = None
            incarnation = member_of.setdefault(member, len(began)) if member else len(began)
            of_op[op.index] = incarnation
            if incarnation < len(began) and op.invoke_ns > began[incarnation].complete_ns:
                found.append(
                    Violation(
                        "generation",
                        f"group {group}: #{op.index} {op.what} by {op.process} answered NONE for member {member} of"
                        f" an incarnation of the group that ended when #{began[incarnation].index} began the next",
                        [began[incarnation].index, op.index],
                    )
                )
            if incarnation == len(began) and (earliest_done is None or op.complete_ns < earliest_done):
                earliest_done = op.complete_ns
    return of_op, found[:20]


def _generations_go_forward(ops: list[Op], incarnations: dict[int, int]) -> list[Violation]:
    found = []
    by_group: dict[tuple[str, int], list[tuple[Op, int]]] = defaultdict(list)
    for op in ops:
        if (generation := _generation_seen(op)) is not None:
            by_group[(op.group, incarnations.get(op.index, 0))].append((op, generation))
    for (group, _), seen in by_group.items():
        by_complete = sorted(seen, key=lambda s: s[0].complete_ns)
        highest: tuple[Op, int] | None = None
        k = 0
        for op, generation in sorted(seen, key=lambda s: s[0].invoke_ns):
            while k < len(by_complete) and by_complete[k][0].complete_ns < op.invoke_ns:
                if highest is None or by_complete[k][1] > highest[1]:
                    highest = by_complete[k]
                k += 1
            if highest is not None and generation < highest[1]:
                found.append(
                    Violation(
                        "generation",
                        f"group {group}: #{op.index} {op.what} by {op.process} answered NONE in generation"
                        f" {generation} after #{highest[0].index} {highest[0].what} had shown generation {highest[1]}",
                        [highest[0].index, op.index],
                    )
                )
    return found[:20]


def _assigned(op: Op) -> set[tuple[str, int]]:
    raw = base64.b64decode((op.answer or {}).get("assignment") or b"")
    if not raw:
        return set()
    decoded = json.loads(raw)
    return {(topic, p) for topic, partitions in decoded.get("partitions", {}).items() for p in partitions}


def _assignments_disjoint(ops: list[Op], incarnations: dict[int, int]) -> list[Violation]:
    owners: dict[tuple[str, int, int, str, int], tuple[str, Op]] = {}
    found = []
    for op in ops:
        if op.what != "sync" or _code(op) != 0:
            continue
        member = op.request.get("group_instance_id") or op.request["member_id"]
        generation = int(op.request["generation_id"])
        for topic, partition in _assigned(op):
            key = (op.group, incarnations.get(op.index, 0), generation, topic, partition)
            other = owners.setdefault(key, (member, op))
            if other[0] != member:
                found.append(
                    Violation(
                        "assignment",
                        f"group {op.group} generation {generation}: {topic}/{partition} assigned to {other[0]}"
                        f" (#{other[1].index}) and to {member} (#{op.index})",
                        [other[1].index, op.index],
                    )
                )
    return found[:20]


def _fixed_static_groups_do_not_rebalance(ops: list[Op], groups: set[str]) -> list[Violation]:
    found = []
    formed: dict[str, tuple[int, Op]] = {}
    allowed = {group: _replaced_before_sync(ops, group) for group in groups}
    for op in sorted(ops, key=lambda o: o.complete_ns):
        if op.group not in groups or (generation := _generation_seen(op)) is None:
            continue
        if op.what == "sync" and op.group not in formed:
            formed[op.group] = (generation, op)
        elif op.group in formed and generation > formed[op.group][0] and allowed[op.group]:
            allowed[op.group] -= 1  # Kafka's sync timeout of an incarnation replaced before it synced
            formed[op.group] = (generation, op)
        elif op.group in formed and generation != formed[op.group][0]:
            first = formed[op.group]
            found.append(
                Violation(
                    "rebalance",
                    f"static group {op.group} formed in generation {first[0]} (#{first[1].index}), but #{op.index}"
                    f" {op.what} by {op.process} answered NONE in generation {generation}",
                    [first[1].index, op.index],
                )
            )
            groups = groups - {op.group}  # one report per group
    return found


def _replaced_before_sync(ops: list[Op], group: str) -> int:
    """How many incarnations of a static member of ``group`` sent a join (answered NONE, or not answered), never had
    a sync answered NONE, and were then replaced by a later incarnation of their instance id.

    Each may cost the group one rebalance, as on Kafka: the member id awaited in the sync phase stays awaited when
    its instance is taken over (``ClassicGroup.replaceStaticMember`` leaves ``pendingSyncMembers`` alone), so the
    sync timeout (the rebalance timeout after the join phase completed) rebalances the group although the
    replacement synced. Found by seed 3054 (docs/api.md, §11)."""
    first_join: dict[str, tuple[int, str]] = {}  # process -> (its first join's invoke, instance id)
    synced: set[str] = set()
    for op in ops:
        if op.group != group:
            continue
        instance = op.request.get("group_instance_id")
        if op.what == "join" and instance and op.error in (None, "NONE") and op.process not in first_join:
            first_join[op.process] = (op.invoke_ns, str(instance))
        elif op.what == "sync" and op.error == "NONE":
            synced.add(op.process)
    return sum(
        1
        for process, (at, instance) in first_join.items()
        if process not in synced
        and any(other != process and i == instance and later > at for other, (later, i) in first_join.items())
    )


def _old_member_ids_stay_out(ops: list[Op]) -> list[Violation]:
    gone: dict[tuple[str, str], tuple[int, str, Op]] = {}  # (group, member id) -> (since, why, the op that did it)
    current: dict[tuple[str, str], str] = {}  # (group, instance id) -> its member id
    for op in sorted(ops, key=lambda o: o.complete_ns):
        if _code(op) != 0:
            continue
        if op.what == "join" and op.answer and (instance := op.request.get("group_instance_id")):
            member = op.answer["member_id"]
            previous = current.get((op.group, instance))
            if previous is not None and previous != member:
                gone.setdefault((op.group, previous), (op.complete_ns, f"replaced by {member}", op))
            current[(op.group, instance)] = member
        elif op.what == "leave":
            for left in (op.answer or {}).get("members", []):
                if left.get("error_code", 0) == 0 and left.get("member_id"):
                    gone.setdefault((op.group, left["member_id"]), (op.complete_ns, "left", op))
            if op.request.get("member_id"):
                gone.setdefault((op.group, op.request["member_id"]), (op.complete_ns, "left", op))
    found = []
    for op in ops:
        member = op.request.get("member_id")
        if not member or op.what not in ("heartbeat", "sync", "commit", "join") or _code(op) != 0:
            continue
        ended = gone.get((op.group, member))
        if ended is not None and op.invoke_ns > ended[0]:
            found.append(
                Violation(
                    "fencing",
                    f"group {op.group}: member {member} was {ended[1]} (#{ended[2].index}), yet #{op.index} {op.what}"
                    " sent afterwards was answered NONE",
                    [ended[2].index, op.index],
                )
            )
    return found[:20]


def _readiness_honest(probes: dict[str, list[tuple[int, int, str]]]) -> list[Violation]:
    """``probes``: per coordinator, (invoke, complete, kind) with kind ``ready``/``unready`` (a /readyz answer) or
    ``written``/``refused``/``lost`` (a probe commit sent to it). A ``ready`` is a lie when the commits before it have
    been refused for longer than the window and the next one is refused too (the store still refused writes)."""
    found = []
    for replica, seen in probes.items():
        refused_since: int | None = None
        claimed: int | None = None  # a "ready" answered while the refusals went on
        for invoke, _complete, kind in sorted(seen, key=lambda s: s[1]):
            if kind == "written":
                refused_since = claimed = None
            elif kind == "refused":
                if claimed is not None and refused_since is not None:
                    found.append(
                        Violation(
                            "readiness",
                            f"{replica} answered /readyz 200 although every probe commit sent to it for"
                            f" {(claimed - refused_since) / 1e9:.1f} s before and the next one after were refused",
                        )
                    )
                    break
                if refused_since is None:
                    refused_since = invoke
            elif kind == "ready" and refused_since is not None and invoke - refused_since > REFUSED_WINDOW_NS:
                claimed = invoke
    return found
