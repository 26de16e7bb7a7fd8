"""Instance ids of a fleet: ``<fleet>-<ordinal>``, the StatefulSet's pod names and the members' group.instance.id.

Rules: ordinals start at 0 and have no padding (the StatefulSet controller's naming); a name that is not
``<fleet>-<decimal ordinal>`` belongs to something else and has no ordinal. Lists of ids are sorted by ordinal,
not as strings, so that ``f-10`` follows ``f-9``. A member id ``<fleet>-<ordinal>-<digits>`` is a thread of pod
``<fleet>-<ordinal>`` (Kafka Streams, Camel and others append a thread index to ``group.instance.id``).
"""

from __future__ import annotations

from collections.abc import Iterable


def instance_id(fleet_name: str, ordinal: int) -> str:
    return f"{fleet_name}-{ordinal}"


def instance_ids(fleet_name: str, count: int) -> tuple[str, ...]:
    """The ids of a fleet of ``count`` members: ``<fleet>-0`` .. ``<fleet>-<count-1>``."""
    return tuple(instance_id(fleet_name, ordinal) for ordinal in range(count))


def ordinal_of(fleet_name: str, name: str) -> int | None:
    """The ordinal of ``name`` in the fleet, or None when ``name`` is not one of the fleet's instance ids."""
    prefix = f"{fleet_name}-"
    if not name.startswith(prefix):
        return None
    digits = name[len(prefix) :]
    # "f-01" or "f-+1" would parse with int() but are not names the StatefulSet controller gives.
    if not digits.isascii() or not digits.isdigit() or (len(digits) > 1 and digits[0] == "0"):
        return None
    return int(digits)


def sorted_by_ordinal(fleet_name: str, names: Iterable[str]) -> tuple[str, ...]:
    """The fleet's instance ids among ``names``, deduplicated and in ordinal order; other names are dropped."""
    ordinals = {ordinal for name in names if (ordinal := ordinal_of(fleet_name, name)) is not None}
    return tuple(instance_id(fleet_name, ordinal) for ordinal in sorted(ordinals))


def pod_of_member(fleet_name: str, member: str) -> str | None:
    """The fleet pod a group.instance.id belongs to: itself, or ``<pod>`` for a thread-suffixed ``<pod>-<n>``."""
    if ordinal_of(fleet_name, member) is not None:
        return member
    pod, dash, suffix = member.rpartition("-")
    if dash and suffix.isascii() and suffix.isdigit() and ordinal_of(fleet_name, pod) is not None:
        return pod
    return None
