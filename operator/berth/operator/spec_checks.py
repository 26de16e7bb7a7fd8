"""The checks every part of a ConsumerFleet's spec is parsed with, and the error they raise.

Owns :class:`SpecError` and the primitive checks (``mapping``, ``string``, ``integer``...) that ``spec`` and
``spec_stateful`` share. Rules: each check takes the value and the field's path in the object
(``spec.sessionTimeout.fixedMs``) and returns the value typed, or raises :class:`SpecError` naming that path,
because the message becomes a status condition and an Event. ``null`` counts as absent, as the API server's
defaulting treats it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

#: ``"25%"``: a share of the fleet's pods, as Kubernetes' IntOrString fields take it.
_PERCENT = re.compile(r"^(0|[1-9][0-9]?|100)%$")


class SpecError(ValueError):
    """A ConsumerFleet the operator cannot act on; ``field`` is the path of the offending field."""

    def __init__(self, field: str, problem: str) -> None:
        self.field = field
        self.problem = problem
        super().__init__(f"{field}: {problem}")


def get_or_default(obj: Mapping[str, Any], key: str, default: Any) -> Any:
    """``obj[key]``, or ``default`` when it is absent or null (as the API server's defaulting treats null)."""
    value = obj.get(key)
    return default if value is None else value


def mapping(value: object, field: str) -> Mapping[str, Any]:
    if value is None:
        raise SpecError(field, "is required")
    if not isinstance(value, Mapping):
        raise SpecError(field, f"must be a mapping, not {type(value).__name__}")
    return value


def string(value: object, field: str) -> str:
    if value is None:
        raise SpecError(field, "is required")
    if not isinstance(value, str) or not value:
        raise SpecError(field, f"must be a non-empty string, not {value!r}")
    return value


def optional_string(value: object, field: str) -> str | None:
    return None if value is None else string(value, field)


def boolean(value: object, field: str) -> bool:
    if not isinstance(value, bool):
        raise SpecError(field, f"must be true or false, not {value!r}")
    return value


def integer(value: object, field: str, *, minimum: int, maximum: int | None = None) -> int:
    # bool is an int subclass; `replicas: true` is a mistake, not 1.
    if isinstance(value, bool) or not isinstance(value, int):
        raise SpecError(field, f"must be an integer, not {value!r}")
    if value < minimum:
        raise SpecError(field, f"{value} is below the minimum {minimum}")
    if maximum is not None and value > maximum:
        raise SpecError(field, f"{value} is above the maximum {maximum}")
    return value


def number(value: object, field: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise SpecError(field, f"must be a number, not {value!r}")
    return float(value)


def count_or_percent(value: object, field: str, *, minimum: int) -> int | str:
    """An IntOrString share of pods: an integer of at least ``minimum``, or ``"N%"`` (0..100, at least ``minimum``)."""
    if isinstance(value, str):
        if not _PERCENT.match(value) or int(value[:-1]) < minimum:
            raise SpecError(field, f"{value!r} is not a percentage from {minimum}% to 100%")
        return value
    return integer(value, field, minimum=minimum, maximum=2**31 - 1)
