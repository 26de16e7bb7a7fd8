"""Decoding a ConsumerFleet's spec against its declaration, and the error that names what is wrong.

Owns :class:`SpecError`, :func:`decode` (a value as one of ``spec.declaration``'s Structs, with msgspec) and the
few checks the declaration cannot say (``mapping``, ``string``, ``count_or_percent``). Rules:

- Every error names the offending field by its path in the object (``spec.sessionTimeout.fixedMs``, ``spec.template
  .spec.containers[0].name``) and says what is wrong with the value in words, because the message becomes a status
  condition and an Event: msgspec finds the field, and :func:`explain` words it from the declaration of that field
  (its type, bounds, enum or the pattern's meaning) and the value found there.
- ``null`` counts as absent, as the API server's defaulting treats it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, TypeVar

import msgspec
from msgspec import inspect

T = TypeVar("T")

#: ``"25%"``: a share of the fleet's pods, as Kubernetes' IntOrString fields take it.
_PERCENT = re.compile(r"^(0|[1-9][0-9]?|100)%$")


class SpecError(ValueError):
    """A ConsumerFleet the operator cannot act on; ``field`` is the path of the offending field."""

    def __init__(self, field: str, problem: str) -> None:
        self.field = field
        self.problem = problem
        super().__init__(f"{field}: {problem}")


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


def integer(value: object, field: str, *, minimum: int, maximum: int | None = None) -> int:
    # bool is an int subclass; `replicas: true` is a mistake, not 1.
    if isinstance(value, bool) or not isinstance(value, int):
        raise SpecError(field, f"must be an integer, not {value!r}")
    if value < minimum:
        raise SpecError(field, f"{value} is below the minimum {minimum}")
    if maximum is not None and value > maximum:
        raise SpecError(field, f"{value} is above the maximum {maximum}")
    return value


def count_or_percent(value: object, field: str, *, minimum: int) -> int | str:
    """An IntOrString share of pods: an integer of at least ``minimum``, or ``"N%"`` (0..100, at least ``minimum``)."""
    if isinstance(value, str):
        if not _PERCENT.match(value) or int(value[:-1]) < minimum:
            raise SpecError(field, f"{value!r} is not a percentage from {minimum}% to 100%")
        return value
    return integer(value, field, minimum=minimum, maximum=2**31 - 1)


# --- decoding against the declaration --------------------------------------------------------------------------------


def decode(value: object, declared: type[T], field: str) -> T:
    """``value`` (a plain dict from the API) as ``declared``; :class:`SpecError` naming the first field that is not
    as declared, the way :func:`explain` words it."""
    try:
        return msgspec.convert(without_nulls(value), declared, strict=True)
    except msgspec.ValidationError as error:
        raise explain(str(error), without_nulls(value), declared, field) from None


def without_nulls(value: Any) -> Any:
    """``value`` with every null member of a mapping left out (an absent field)."""
    if isinstance(value, Mapping):
        return {key: without_nulls(item) for key, item in value.items() if item is not None}
    if isinstance(value, list):
        return [without_nulls(item) for item in value]
    return value


_AT = re.compile(r" - at `\$(?P<path>.*)`$")
_MISSING = re.compile(r"^Object missing required field `(?P<name>[^`]+)`")
_STEP = re.compile(r"\.(?P<name>[^.\[]+)|\[(?P<index>\d+)\]|\[\.\.\.\]")


def explain(message: str, value: object, declared: Any, field: str) -> SpecError:
    """The :class:`SpecError` for msgspec's ``message`` about ``value`` as ``declared``: the path it names, followed
    through the value and the declaration, and the declaration of that field held against the value found there."""
    at = _AT.search(message)
    node, info = value, _unwrap(inspect.type_info(declared))[0]
    where = field
    for step in _STEP.finditer(at.group("path") if at else ""):
        if step.group("name") is not None:
            name = step.group("name")
            where, node = f"{where}.{name}", node.get(name) if isinstance(node, Mapping) else None
            info = _field_type(info, name)
        elif step.group("index") is not None:
            index = int(step.group("index"))
            where, node = f"{where}[{index}]", node[index] if isinstance(node, list) else None
            info = _unwrap(info)[0].item_type
        else:  # a mapping's value: msgspec does not say which, the first one that does not fit does
            values = _unwrap(info)[0].value_type
            members = node if isinstance(node, Mapping) else {}
            key = next((k for k, v in members.items() if _problem(v, values) is not None), "")
            where, node, info = f"{where}[{key!r}]", members.get(key), values
    missing = _MISSING.match(message)
    if missing:
        return SpecError(f"{where}.{missing.group('name')}", "is required")
    return SpecError(where, _problem(node, info) or message.split(" - at ")[0])


def _unwrap(info: Any) -> tuple[Any, dict[str, Any]]:
    """The type behind Annotated metadata and ``| None``, and the metadata's ``extra``."""
    extra: dict[str, Any] = {}
    while True:
        if isinstance(info, inspect.Metadata):
            extra |= info.extra or {}
            info = info.type
        elif isinstance(info, inspect.UnionType):
            types = [t for t in info.types if not isinstance(t, inspect.NoneType)]
            if len(types) != 1:
                return info, extra
            info = types[0]
        else:
            return info, extra


def _field_type(info: Any, name: str) -> Any:
    struct = _unwrap(info)[0]
    return next(f.type for f in struct.fields if f.encode_name == name)


def _problem(value: object, info: Any) -> str | None:
    """What is wrong with ``value`` as declared by ``info``, in words; None when nothing is."""
    kind, extra = _unwrap(info)
    if isinstance(kind, inspect.IntType):
        if isinstance(value, bool) or not isinstance(value, int):
            return f"must be an integer, not {value!r}"
        return _bounds(value, kind)
    if isinstance(kind, inspect.FloatType):
        if isinstance(value, bool) or not isinstance(value, int | float):
            return f"must be a number, not {value!r}"
        return _bounds(value, kind, float)
    if isinstance(kind, inspect.BoolType):
        return None if isinstance(value, bool) else f"must be true or false, not {value!r}"
    if isinstance(kind, inspect.StrType):
        if not isinstance(value, str) or (not value and kind.min_length):
            return f"must be a {'non-empty ' if kind.min_length else ''}string, not {value!r}"
        if kind.max_length is not None and len(value) > kind.max_length:
            return f"is {len(value)} characters; at most {kind.max_length}"
        if kind.pattern is not None and not re.search(kind.pattern, value):
            return f"{value!r} {extra.get('invalid', f'does not match {kind.pattern}')}"
        return None
    if isinstance(kind, inspect.LiteralType | inspect.EnumType):
        choices = kind.values if isinstance(kind, inspect.LiteralType) else tuple(m.value for m in kind.cls)
        return None if value in choices else f"{value!r} is not one of {', '.join(map(str, choices))}"
    if isinstance(kind, inspect.StructType | inspect.DictType):
        return None if isinstance(value, Mapping) else f"must be a mapping, not {type(value).__name__}"
    if isinstance(kind, inspect.ListType):
        if not isinstance(value, list):
            return "must be a list"
        if kind.min_length and len(value) < kind.min_length:
            least = "one" if kind.min_length == 1 else kind.min_length
            return f"must list at least {least} {extra.get('item', 'item')}"
        if kind.max_length is not None and len(value) > kind.max_length:
            return f"lists {len(value)} items; at most {kind.max_length}"
        return None
    if isinstance(kind, inspect.UnionType):  # int | str: a count or a percentage
        ok = isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))
        return None if ok else f"must be an integer or a percentage, not {value!r}"
    return None


def _bounds(value: float, kind: Any, shown: type[int] | type[float] = int) -> str | None:
    if kind.ge is not None and value < kind.ge:
        return f"{value} is below the minimum {shown(kind.ge)}"
    if kind.le is not None and value > kind.le:
        return f"{value} is above the maximum {shown(kind.le)}"
    return None
