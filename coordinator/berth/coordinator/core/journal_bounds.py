"""Journal events bounded in size (docs/formats.md "Journal events", "Bounded events").

Two events grow with a group: ``assignment_stored`` (every member's assignment) and ``rebalance_completed`` (every
member's ids). Everything else is bounded by the request limits (ids and names). When one of the two would be
larger than ``journal_event_max_bytes`` it is summarised, keeping what the pipeline reads for as long as it fits:

- ``assignment_stored``, step 1: each assignment in the member library's encoding (JSON with ``version >= 1`` and a
  ``partitions`` object) is replaced by the same JSON with only ``version`` and ``partitions`` (user data and
  unknown fields go), still base64, so the pipeline's partitions-moved figures are unchanged; any other assignment
  becomes ``null`` (the pipeline counts it as unknown). Every member entry gains ``assignment_bytes`` (the size the
  leader sent) and the event ``summarised: true``.
- step 2, when that is still too big: every ``assignment`` is ``null`` (ids and ``assignment_bytes`` stay).
- step 3: no ``assignments`` at all, and ``member_count``.
- ``rebalance_completed``: ``members`` goes and ``member_count`` says how many there were.

Sizes are estimated from the lengths of the parts (base64 is 4/3 of the bytes, each entry's keys and quotes a
fixed allowance), so the bound costs nothing for the small events that are nearly all of them.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import msgspec

from berth.coordinator.core.member import Member
from berth.coordinator.protocol import MemberId

# JSON keys, quotes, commas and braces of one entry, generously: the estimate errs on the large side.
_ASSIGNMENT_ENTRY_OVERHEAD = 96
_MEMBER_ENTRY_OVERHEAD = 48
_EVENT_OVERHEAD = 256

_encode = msgspec.json.Encoder(order="sorted").encode
_decode = msgspec.json.decode


class _LibraryAssignment(msgspec.Struct, frozen=True):
    """What the summary keeps of the member library's assignment (docs/formats.md "Member library encoding")."""

    version: int
    partitions: dict[str, list[int]]


def assignment_stored_fields(
    members: Iterable[Member], assignment: dict[MemberId, bytes], max_bytes: int
) -> dict[str, Any]:
    """The ``assignments`` of an ``assignment_stored`` event, summarised when over ``max_bytes``."""
    entries = [(m.member_id, m.group_instance_id, assignment[m.member_id]) for m in members]
    ids_size = sum(_text_size(m) + _text_size(i) + _ASSIGNMENT_ENTRY_OVERHEAD for m, i, _ in entries)
    if _EVENT_OVERHEAD + ids_size + sum(_base64_size(len(a)) for _, _, a in entries) <= max_bytes:
        return {
            "assignments": [
                {"member_id": m, "group_instance_id": i, "assignment": a}  # bytes: base64 in the journal's JSON
                for m, i, a in entries
            ]
        }
    kept = [(m, i, a, partitions_only(a)) for m, i, a in entries]
    if _EVENT_OVERHEAD + ids_size + sum(_base64_size(len(p or b"")) for *_, p in kept) <= max_bytes:
        return {
            "summarised": True,
            "assignments": [
                {"member_id": m, "group_instance_id": i, "assignment": p, "assignment_bytes": len(a)}
                for m, i, a, p in kept
            ],
        }
    if _EVENT_OVERHEAD + ids_size <= max_bytes:
        return {
            "summarised": True,
            "assignments": [
                {"member_id": m, "group_instance_id": i, "assignment": None, "assignment_bytes": len(a)}
                for m, i, a in entries
            ],
        }
    return {"summarised": True, "member_count": len(entries)}


def rebalance_completed_fields(members: Iterable[tuple[MemberId, str | None]], max_bytes: int) -> dict[str, Any]:
    """The ``members`` of a ``rebalance_completed`` event, or only their count when over ``max_bytes``."""
    listed = list(members)
    size = _EVENT_OVERHEAD + sum(_text_size(m) + _text_size(i) + _MEMBER_ENTRY_OVERHEAD for m, i in listed)
    if size <= max_bytes:
        return {"members": [{"member_id": m, "group_instance_id": i} for m, i in listed]}
    return {"summarised": True, "member_count": len(listed)}


def partitions_only(assignment: bytes) -> bytes | None:
    """The member library's assignment reduced to ``version`` and ``partitions``; None for any other bytes."""
    try:
        decoded = _decode(assignment, type=_LibraryAssignment)
    except (msgspec.DecodeError, UnicodeDecodeError):
        return None
    if decoded.version < 1:
        return None
    return _encode(decoded)


def _text_size(text: str | None) -> int:
    """Bytes of the text as a JSON string: quoted, UTF-8; a control character is escaped in six."""
    if text is None:
        return 4
    if text.isascii() and text.isprintable():
        return len(text) + 2
    return 6 * len(text) + 2


def _base64_size(n: int) -> int:
    return 4 * ((n + 2) // 3)
