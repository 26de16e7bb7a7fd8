"""The ids the protocol passes around, as distinct types so that mypy keeps them apart (docs/api.md §2, §11).

At run time a ``GroupId`` is a ``str``; the ``NewType`` only tells a group id from a member id or an instance id
in signatures. ``MemberId("")`` is the empty member id of a new member (and of a removal by instance id).
"""

from __future__ import annotations

from typing import NewType

GroupId = NewType("GroupId", str)
MemberId = NewType("MemberId", str)
InstanceId = NewType("InstanceId", str)  # Kafka's group.instance.id (KIP-345)

#: A group id is 1 to 255 bytes of UTF-8 (docs/api.md §2); longer ones are answered INVALID_GROUP_ID in-band.
MAX_GROUP_ID_BYTES = 255


def group_id_too_long(group_id: str) -> bool:
    # A character is at most 4 bytes of UTF-8: short ids need no encoding to be known short enough.
    return len(group_id) * 4 > MAX_GROUP_ID_BYTES and len(group_id.encode("utf-8")) > MAX_GROUP_ID_BYTES
