"""How ``berth-groups`` shows results: aligned text tables for people, JSON documents for scripts.

Owns ``to_json`` (one document per result, stable keys) and the ``*_table`` renderers. Rules: pure functions from
typed results to text; no I/O. Assignments and subscriptions are shown decoded when they are the Berth encoding
and as a byte count otherwise (never guessed at).

Every string the coordinator sent (group, member, instance and client ids, hosts, topic names, metadata) is
untrusted: a table shows it through ``shown``, which escapes control and format characters (``\x1b``, ``\n``,
``\u202e``) and the backslash itself, so a group id can neither drive the terminal nor pass for another one; JSON
escapes control characters by itself, and ``to_json`` escapes format characters too.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from berth.coordinator.client.encoding import read_assignment, read_subscription
from berth.coordinator.groups.groups_reset import PlannedReset
from berth.coordinator.protocol import DescribedMember, Error, GroupOwner, ListedGroup, TopicPartition
from berth.coordinator.protocol import DescribeResponse as GroupDescription
from berth.coordinator.protocol import FetchedPartition as CommittedOffset
from berth.coordinator.protocol import LeaveMemberResult as MemberRemoval


def to_json(document: Any) -> str:
    text = json.dumps(document, indent=2, sort_keys=True, ensure_ascii=False)
    # Format characters (bidi overrides, ...) can only be inside strings here: \uXXXX keeps the JSON the same.
    return "".join(c if c.isprintable() or c == "\n" else json.dumps(c)[1:-1] for c in text)


def shown(text: str) -> str:
    """Server text as a table shows it: printable characters as they are, everything else (and ``\\``) escaped."""
    if text.isprintable() and "\\" not in text:
        return text
    return "".join(_shown_char(c) for c in text)


def _shown_char(char: str) -> str:
    if char == "\\":
        return "\\\\"
    if char.isprintable():
        return char
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """Columns padded to their widest cell, two spaces apart; the last column is not padded."""
    widths = [max([len(header)] + [len(row[i]) for row in rows]) for i, header in enumerate(headers)]

    def line(cells: Sequence[str]) -> str:
        padded = [cell.ljust(width) for cell, width in zip(cells[:-1], widths[:-1], strict=True)]
        return "  ".join([*padded, cells[-1]]).rstrip()

    return "\n".join([line(headers), *(line(row) for row in rows)])


# ---------------------------------------------------------------------------------------------------------- list


def listing_json(groups: Sequence[ListedGroup]) -> dict[str, Any]:
    return {
        "groups": [
            {"group_id": g.group_id, "group_state": g.state, "protocol_type": g.protocol_type}
            for g in sorted(groups, key=lambda g: g.group_id)
        ]
    }


def listing_table(groups: Sequence[ListedGroup]) -> str:
    if not groups:
        return "no groups"
    rows = [
        [shown(g.group_id), shown(g.state), shown(g.protocol_type) or "-"]
        for g in sorted(groups, key=lambda g: g.group_id)
    ]
    return table(["GROUP", "STATE", "PROTOCOL TYPE"], rows)


# ------------------------------------------------------------------------------------------------------ describe


@dataclass(frozen=True)
class GroupReport:
    """What ``describe`` shows of one group: its description, expected members and committed offsets.

    ``expected`` is None when the token may not read them (the expected-members route needs an admin token).
    """

    description: GroupDescription
    expected: tuple[str, ...] | None = None
    offsets: Mapping[TopicPartition, CommittedOffset] = field(default_factory=dict)

    @property
    def not_joined(self) -> tuple[str, ...] | None:
        """Expected instance ids that are not members (yet)."""
        if self.expected is None:
            return None
        joined = self.description.instance_ids()
        return tuple(i for i in self.expected if i not in joined)


def description_json(report: GroupReport) -> dict[str, Any]:
    group = report.description
    return {
        "group_id": group.group_id,
        "group_state": group.state,
        "protocol_type": group.protocol_type,
        "protocol": group.protocol,
        "generation_id": group.generation_id,
        "leader": group.leader,
        "owner": _owner_json(group.owner),
        "expected_members": None if report.expected is None else list(report.expected),
        "expected_not_joined": None if report.not_joined is None else list(report.not_joined),
        "members": [_member_json(member) for member in _ordered(group.members)],
        "offsets": _offsets_list(report.offsets),
    }


def descriptions_json(reports: Sequence[GroupReport]) -> dict[str, Any]:
    return {"groups": [description_json(report) for report in reports]}


def description_table(report: GroupReport) -> str:
    """The default view: the group's header line, owner and expected members, then its members."""
    group = report.description
    protocol = f"{group.protocol_type}/{group.protocol}" if group.protocol else group.protocol_type or "-"
    header = (
        f"group {shown(group.group_id)}  state {shown(group.state)}  generation {group.generation_id}  "
        f"protocol {shown(protocol)}  members {len(group.members)}"
    )
    lines = [header, f"owner {_owner_text(group.owner)}  {_expected_text(report)}"]
    if group.members:
        rows = [
            [
                shown(member.group_instance_id or "-"),
                shown(member.member_id) + (" (leader)" if member.member_id == group.leader else ""),
                shown(member.client_id or "-"),
                shown(member.client_host or "-"),
                _assignment_text(member),
            ]
            for member in _ordered(group.members)
        ]
        lines.append(table(["INSTANCE ID", "MEMBER ID", "CLIENT ID", "HOST", "ASSIGNMENT"], rows))
    return "\n".join(lines)


def state_table(reports: Sequence[GroupReport]) -> str:
    """``--state``: one row per group (Kafka's GROUP, ASSIGNMENT-STRATEGY, STATE, #MEMBERS, and Berth's own)."""
    rows = [
        [
            shown(r.description.group_id),
            shown(r.description.state),
            str(r.description.generation_id),
            shown(r.description.protocol or "-"),
            str(len(r.description.members)),
            _count(r.expected),
            _ids(r.not_joined),
            _owner_text(r.description.owner),
        ]
        for r in reports
    ]
    headers = ["GROUP", "STATE", "GENERATION", "ASSIGNMENT-STRATEGY", "#MEMBERS", "#EXPECTED", "NOT-JOINED", "OWNER"]
    return table(headers, rows)


def members_table(reports: Sequence[GroupReport], *, verbose: bool) -> str:
    """``--members [--verbose]``: one row per member, its partition count (and with verbose its partitions)."""
    rows = []
    for report in reports:
        group = report.description
        for member in _ordered(group.members):
            row = [
                shown(group.group_id),
                shown(member.member_id),
                shown(member.group_instance_id or "-"),
                shown(member.client_host or "-"),
                shown(member.client_id or "-"),
                _partition_count(member),
            ]
            if verbose:
                row.append(_assignment_text(member))
            rows.append(row)
    if not rows:
        return _no_members(reports)
    headers = ["GROUP", "CONSUMER-ID", "GROUP-INSTANCE-ID", "HOST", "CLIENT-ID", "#PARTITIONS"]
    return table([*headers, "ASSIGNMENT"] if verbose else headers, rows)


def offsets_view_table(reports: Sequence[GroupReport]) -> str:
    """``--offsets``: every committed or assigned partition, its committed offset and the member that holds it.

    Kafka's LOG-END-OFFSET and LAG are not shown: the coordinator does not know the logs.
    """
    rows = []
    for report in reports:
        group = report.description
        holders: dict[TopicPartition, DescribedMember] = {}
        for member in group.members:
            assignment = read_assignment(member.member_assignment)
            for topic, numbers in (assignment.partitions if assignment is not None else {}).items():
                holders.update({(topic, number): member for number in numbers})
        for topic, partition in sorted(set(report.offsets) | set(holders)):
            committed = report.offsets.get((topic, partition))
            holder = holders.get((topic, partition))
            rows.append(
                [
                    shown(group.group_id),
                    shown(topic),
                    str(partition),
                    "-" if committed is None else str(committed.offset),
                    "-" if holder is None else shown(holder.member_id),
                    "-" if holder is None else shown(holder.group_instance_id or "-"),
                    "-" if holder is None else shown(holder.client_host or "-"),
                    "-" if holder is None else shown(holder.client_id or "-"),
                ]
            )
    if not rows:
        names = ", ".join(shown(r.description.group_id) for r in reports)
        return f"no committed or assigned partitions in {names}" if names else "no groups"
    headers = ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "CONSUMER-ID", "GROUP-INSTANCE-ID", "HOST", "CLIENT-ID"]
    return table(headers, rows)


def _owner_json(owner: GroupOwner | None) -> dict[str, str] | None:
    return None if owner is None else {"namespace": owner.namespace, "name": owner.name, "uid": owner.uid}


def _owner_text(owner: GroupOwner | None) -> str:
    return "-" if owner is None else f"{shown(owner.namespace)}/{shown(owner.name)}"


def _expected_text(report: GroupReport) -> str:
    if report.expected is None:
        return "expected ? (reading them needs an admin token)"
    if not report.expected:
        return "expected -"
    return f"expected {_ids(report.expected)}  not joined {_ids(report.not_joined)}"


def _ids(ids: Sequence[str] | None) -> str:
    if ids is None:
        return "?"
    return ",".join(shown(i) for i in ids) or "-"


def _count(ids: Sequence[str] | None) -> str:
    return "?" if ids is None else str(len(ids))


def _partition_count(member: DescribedMember) -> str:
    assignment = read_assignment(member.member_assignment)
    return "?" if assignment is None else str(assignment.partition_count)


def _no_members(reports: Sequence[GroupReport]) -> str:
    names = ", ".join(shown(r.description.group_id) for r in reports)
    return f"no active members in {names}" if names else "no groups"


def _member_json(member: DescribedMember) -> dict[str, Any]:
    subscription = read_subscription(member.member_metadata)
    assignment = read_assignment(member.member_assignment)
    return {
        "member_id": member.member_id,
        "group_instance_id": member.group_instance_id,
        "client_id": member.client_id,
        "client_host": member.client_host,
        "session_timeout_ms": member.session_timeout_ms,
        "rebalance_timeout_ms": member.rebalance_timeout_ms,
        "member_metadata": base64.b64encode(member.member_metadata).decode("ascii"),
        "member_assignment": base64.b64encode(member.member_assignment).decode("ascii"),
        "subscription": None
        if subscription is None
        else {
            "topics": list(subscription.topics),
            "owned_partitions": {t: list(p) for t, p in subscription.owned_partitions.items()},
        },
        "assignment": None if assignment is None else {t: list(p) for t, p in assignment.partitions.items()},
    }


def _assignment_text(member: DescribedMember) -> str:
    assignment = read_assignment(member.member_assignment)
    if assignment is None:
        return f"<{len(member.member_assignment)} bytes, not the Berth encoding>"
    parts = [f"{shown(topic)}{_ranges(numbers)}" for topic, numbers in assignment.partitions.items() if numbers]
    return " ".join(parts) or "-"


def _ranges(numbers: Sequence[int]) -> str:
    """``[0, 1, 2, 5]`` → ``[0-2,5]``."""
    spans: list[str] = []
    start = previous = None
    for number in [*numbers, None]:
        if number is not None and previous is not None and number == previous + 1:
            previous = number
            continue
        if start is not None:
            spans.append(str(start) if start == previous else f"{start}-{previous}")
        start = previous = number
    return "[" + ",".join(spans) + "]"


def _ordered(members: Sequence[DescribedMember]) -> list[DescribedMember]:
    # The coordinator's member lists are unordered (docs/api.md §1); show them in KIP-345 order.
    return sorted(members, key=lambda m: (m.group_instance_id is None, m.group_instance_id or "", m.member_id))


# ------------------------------------------------------------------------------------------------ remove-members


def removals_json(group_id: str, removals: Sequence[MemberRemoval]) -> dict[str, Any]:
    return {
        "group_id": group_id,
        "members": [
            {"group_instance_id": r.group_instance_id, "member_id": r.member_id, "error": r.error.name}
            for r in removals
        ],
    }


def removals_table(removals: Sequence[MemberRemoval]) -> str:
    rows = [[shown(r.group_instance_id or "-"), shown(r.member_id or "-"), _result_text(r)] for r in removals]
    return table(["INSTANCE ID", "MEMBER ID", "RESULT"], rows)


def _result_text(removal: MemberRemoval) -> str:
    if removal.error.name == "NONE":
        return "removed"
    if removal.error.name == "UNKNOWN_MEMBER_ID":
        return "not a member (UNKNOWN_MEMBER_ID)"
    return removal.error.name


# ------------------------------------------------------------------------------------------------------- offsets


def offsets_json(group_id: str, offsets: Mapping[TopicPartition, CommittedOffset]) -> dict[str, Any]:
    return {"group_id": group_id, "offsets": _offsets_list(offsets)}


def _offsets_list(offsets: Mapping[TopicPartition, CommittedOffset]) -> list[dict[str, Any]]:
    return [
        {
            "topic": topic,
            "partition": partition,
            "offset": committed.offset,
            "leader_epoch": committed.leader_epoch,
            "metadata": committed.metadata,
            "error": committed.error.name,
        }
        for (topic, partition), committed in sorted(offsets.items())
    ]


def offsets_table(group_id: str, offsets: Mapping[TopicPartition, CommittedOffset]) -> str:
    if not offsets:
        return f"group {shown(group_id)} has no committed offsets"
    rows = [
        [shown(topic), str(partition), str(committed.offset), shown(committed.metadata or "-")]
        for (topic, partition), committed in sorted(offsets.items())
    ]
    return table(["TOPIC", "PARTITION", "OFFSET", "METADATA"], rows)


# ------------------------------------------------------------------------------------------------- reset-offsets


def reset_json(
    group_id: str, plan: Sequence[PlannedReset], results: Mapping[TopicPartition, Error] | None
) -> dict[str, Any]:
    """The plan, and with ``results`` (an executed reset) each partition's outcome; ``error`` null on a dry run."""
    return {
        "group_id": group_id,
        "executed": results is not None,
        "offsets": [
            {
                "topic": p.topic,
                "partition": p.partition,
                "current_offset": p.current,
                "new_offset": p.new,
                "error": None if results is None else results.get((p.topic, p.partition), Error.NONE).name,
            }
            for p in plan
        ],
    }


def reset_table(group_id: str, plan: Sequence[PlannedReset], results: Mapping[TopicPartition, Error] | None) -> str:
    """Kafka's GROUP TOPIC PARTITION NEW-OFFSET, with the offset it replaces, and a partition's error if any."""
    rows = [
        [
            shown(group_id),
            shown(p.topic),
            str(p.partition),
            "-" if p.current is None else str(p.current),
            str(p.new),
        ]
        for p in plan
    ]
    headers = ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "NEW-OFFSET"]
    if results is not None and any(e is not Error.NONE for e in results.values()):
        for row, p in zip(rows, plan, strict=True):
            row.append(results.get((p.topic, p.partition), Error.NONE).name)
        headers.append("ERROR")
    return table(headers, rows)
