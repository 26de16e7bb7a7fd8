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
from typing import Any

from berth.coordinator.client.encoding import read_assignment, read_subscription
from berth.coordinator.protocol import DescribedMember, ListedGroup, TopicPartition
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


def description_json(group: GroupDescription) -> dict[str, Any]:
    return {
        "group_id": group.group_id,
        "group_state": group.state,
        "protocol_type": group.protocol_type,
        "protocol": group.protocol,
        "generation_id": group.generation_id,
        "leader": group.leader,
        "members": [_member_json(member) for member in _ordered(group.members)],
    }


def description_table(group: GroupDescription) -> str:
    protocol = f"{group.protocol_type}/{group.protocol}" if group.protocol else group.protocol_type or "-"
    header = (
        f"group {shown(group.group_id)}  state {shown(group.state)}  generation {group.generation_id}  "
        f"protocol {shown(protocol)}  members {len(group.members)}"
    )
    if not group.members:
        return header
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
    return header + "\n" + table(["INSTANCE ID", "MEMBER ID", "CLIENT ID", "HOST", "ASSIGNMENT"], rows)


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
    return {
        "group_id": group_id,
        "offsets": [
            {
                "topic": topic,
                "partition": partition,
                "offset": committed.offset,
                "leader_epoch": committed.leader_epoch,
                "metadata": committed.metadata,
                "error": committed.error.name,
            }
            for (topic, partition), committed in sorted(offsets.items())
        ],
    }


def offsets_table(group_id: str, offsets: Mapping[TopicPartition, CommittedOffset]) -> str:
    if not offsets:
        return f"group {shown(group_id)} has no committed offsets"
    rows = [
        [shown(topic), str(partition), str(committed.offset), shown(committed.metadata or "-")]
        for (topic, partition), committed in sorted(offsets.items())
    ]
    return table(["TOPIC", "PARTITION", "OFFSET", "METADATA"], rows)
