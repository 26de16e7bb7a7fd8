"""What one request may carry besides ``--max-body-bytes`` (docs/api.md §6), and the markers that bind a field.

Every string of a request body is an id or a name and is bounded by ``max_id_bytes`` (UTF-8 bytes), unless its
declaration says ``Unbounded`` (offset-commit metadata: the body bounds it and the core answers
OFFSET_METADATA_TOO_LARGE per partition above ``offset_metadata_max_bytes``). Every list is bounded by
``max_list_items``, unless its declaration names another bound (``MaxProtocols``). A member's metadata (a join's
protocols together) and each assignment of a sync are bounded by ``max_member_metadata_bytes``, checked by the
messages' own ``validate``.
"""

from __future__ import annotations

from dataclasses import dataclass

INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


@dataclass(frozen=True, slots=True)
class Limits:
    """Bounds on one request (the coordinator's ``--max-id-bytes`` and ``--max-list-items`` flags)."""

    max_id_bytes: int = 1024
    max_list_items: int = 100_000
    max_protocols: int = 64
    #: A join's metadata (all its protocols together) and each assignment of a sync, in bytes.
    max_member_metadata_bytes: int = 262_144


@dataclass(frozen=True, slots=True)
class Unbounded:
    """A string field the id limit does not apply to."""


@dataclass(frozen=True, slots=True)
class ListBound:
    """A list field bounded by the named ``Limits`` attribute instead of ``max_list_items``."""

    limit: str


UNBOUNDED = Unbounded()
MAX_PROTOCOLS = ListBound("max_protocols")
