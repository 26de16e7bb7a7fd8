"""What the message declarations say about their fields, compiled once per type for the codec and the docs.

- ``field_shapes``: each field's JSON name, kind (string, list of structs ...) and markers: version gates
  (``Since``, ``Until``, ``IgnoredBefore``) and limits (``Unbounded``, ``ListBound``).
- ``plan_of``: a request type's checks: id strings and lists against ``Limits`` (naming the field's path), and
  which fields a version may not carry (refused) or is ignored in (dropped), at any depth.
- ``shape_of``: an answer type's fields an older version does not get, at any depth.
"""

from __future__ import annotations

import types
import typing
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import msgspec

from berth.coordinator.protocol.base import Answer, InvalidRequest
from berth.coordinator.protocol.limits import Limits, ListBound, Unbounded
from berth.coordinator.protocol.versions import IgnoredBefore, Since, Until


@dataclass(frozen=True, slots=True)
class FieldShape:
    """What a declaration says about one field, as the codec and the OpenAPI generator need it."""

    name: str  # the Python attribute
    wire_name: str  # the JSON key
    kind: str  # "str", "strs", "struct", "structs", "bytes" or "other"
    item: type | None  # the struct type of "struct"/"structs"
    since: int | None = None
    until: int | None = None
    ignored_before: int | None = None
    bounded: bool = True  # for strings: the id limit applies
    list_limit: str = "max_list_items"


def _unwrap(annotation: Any) -> tuple[Any, tuple[Any, ...]]:
    """(the type without Annotated, NewType and None, the Annotated metadata)."""
    extras: tuple[Any, ...] = ()
    while True:
        if typing.get_origin(annotation) is typing.Annotated:
            extras += annotation.__metadata__
            annotation = annotation.__origin__
        elif isinstance(annotation, typing.NewType):
            annotation = annotation.__supertype__
        elif typing.get_origin(annotation) in (typing.Union, types.UnionType):
            rest = [a for a in typing.get_args(annotation) if a is not type(None)]
            if len(rest) != 1:
                return annotation, extras
            annotation = rest[0]
        else:
            return annotation, extras


def _is_struct(annotation: Any) -> bool:
    return isinstance(annotation, type) and issubclass(annotation, msgspec.Struct)


def field_shapes(struct: type[msgspec.Struct]) -> tuple[FieldShape, ...]:
    shapes = []
    for info in msgspec.structs.fields(struct):
        base, extras = _unwrap(info.type)
        item: type | None = None
        if base is str:
            kind = "str"
        elif base is bytes:
            kind = "bytes"
        elif _is_struct(base):
            kind, item = "struct", base
        elif typing.get_origin(base) is tuple:
            element, _ = _unwrap(typing.get_args(base)[0])
            if element is str:
                kind = "strs"
            elif _is_struct(element):
                kind, item = "structs", element
            else:
                kind = "other"
        else:
            kind = "other"
        marks: dict[str, Any] = {}
        for extra in extras:
            if isinstance(extra, Since):
                marks["since"] = extra.version
            elif isinstance(extra, Until):
                marks["until"] = extra.version
            elif isinstance(extra, IgnoredBefore):
                marks["ignored_before"] = extra.version
            elif isinstance(extra, Unbounded):
                marks["bounded"] = False
            elif isinstance(extra, ListBound):
                marks["list_limit"] = extra.limit
        shapes.append(FieldShape(info.name, info.encode_name, kind, item, **marks))
    return tuple(shapes)


# --------------------------------------------------------------------------------------------- validation


def _string_size(value: str) -> int:
    return len(value) if value.isascii() else len(value.encode("utf-8"))


def _too_long(path: str, size: int, limit: int) -> InvalidRequest:
    return InvalidRequest(f"{path}: {size} bytes is longer than the {limit}-byte limit")


@dataclass(slots=True)
class Plan:
    """The checks of one struct type, compiled once from its declaration."""

    strings: list[str] = field(default_factory=list)
    string_lists: list[tuple[str, str]] = field(default_factory=list)
    lists: list[tuple[str, str, Plan | None]] = field(default_factory=list)
    structs: list[tuple[str, Plan]] = field(default_factory=list)
    refuse: list[tuple[str, int | None, int | None]] = field(default_factory=list)  # (field, since, until)
    ignore: list[tuple[str, int]] = field(default_factory=list)
    nested_gates: list[tuple[str, bool, Plan]] = field(default_factory=list)  # (field, is list, plan)
    gated_below: int = 0  # versions below this may trip a Since/IgnoredBefore gate
    has_until: bool = False

    def check_limits(self, obj: Any, limits: Limits, path: str) -> None:
        for name in self.strings:
            value = getattr(obj, name)
            if value is not None and (size := _string_size(value)) > limits.max_id_bytes:
                raise _too_long(join_path(path, name), size, limits.max_id_bytes)
        for name, limit_name in self.string_lists:
            values = getattr(obj, name)
            _check_length(values, limits, limit_name, join_path(path, name))
            for i, value in enumerate(values):
                if (size := _string_size(value)) > limits.max_id_bytes:
                    raise _too_long(f"{join_path(path, name)}[{i}]", size, limits.max_id_bytes)
        for name, limit_name, item_plan in self.lists:
            values = getattr(obj, name)
            if values is None:
                continue
            _check_length(values, limits, limit_name, join_path(path, name))
            if item_plan is not None:
                for i, value in enumerate(values):
                    item_plan.check_limits(value, limits, f"{join_path(path, name)}[{i}]")
        for name, item_plan in self.structs:
            value = getattr(obj, name)
            if value is not None:
                item_plan.check_limits(value, limits, join_path(path, name))

    def gates_apply(self, version: int) -> bool:
        return version < self.gated_below or self.has_until

    def carries_too_new(self, obj: Any, version: int) -> bool:
        for name, since, until in self.refuse:
            if getattr(obj, name) is not None and (
                (since is not None and version < since) or (until is not None and version >= until)
            ):
                return True
        for name, is_list, item_plan in self.nested_gates:
            value = getattr(obj, name)
            if value is None or not item_plan.gates_apply(version):
                continue
            if any(item_plan.carries_too_new(item, version) for item in (value if is_list else (value,))):
                return True
        return False

    def without_ignored(self, obj: Any, version: int) -> Any:
        changes: dict[str, Any] = {
            name: None for name, below in self.ignore if version < below and getattr(obj, name) is not None
        }
        for name, is_list, item_plan in self.nested_gates:
            value = getattr(obj, name)
            if value is None or not item_plan.gates_apply(version):
                continue
            if is_list:
                cleaned = tuple(item_plan.without_ignored(item, version) for item in value)
                if any(a is not b for a, b in zip(cleaned, value, strict=True)):
                    changes[name] = cleaned
            elif (cleaned := item_plan.without_ignored(value, version)) is not value:
                changes[name] = cleaned
        return msgspec.structs.replace(obj, **changes) if changes else obj


def join_path(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def _check_length(values: Sequence[Any], limits: Limits, limit_name: str, path: str) -> None:
    limit = getattr(limits, limit_name)
    if len(values) > limit:
        raise InvalidRequest(f"{path}: {len(values)} items is more than the limit of {limit}")


_plans: dict[type, Plan] = {}


def plan_of(struct: type) -> Plan:
    plan = _plans.get(struct)
    if plan is not None:
        return plan
    plan = _plans[struct] = Plan()
    for shape in field_shapes(struct):
        if shape.kind == "str" and shape.bounded:
            plan.strings.append(shape.name)
        elif shape.kind == "strs":
            plan.string_lists.append((shape.name, shape.list_limit))
        elif shape.kind == "structs":
            assert shape.item is not None
            item_plan = plan_of(shape.item)
            plan.lists.append((shape.name, shape.list_limit, item_plan))
            if item_plan.refuse or item_plan.ignore or item_plan.nested_gates:
                plan.nested_gates.append((shape.name, True, item_plan))
                plan.gated_below = max(plan.gated_below, item_plan.gated_below)
                plan.has_until = plan.has_until or item_plan.has_until
        elif shape.kind == "struct":
            assert shape.item is not None
            item_plan = plan_of(shape.item)
            plan.structs.append((shape.name, item_plan))
        if shape.since is not None or shape.until is not None:
            plan.refuse.append((shape.name, shape.since, shape.until))
        if shape.since is not None:
            plan.gated_below = max(plan.gated_below, shape.since)
        if shape.until is not None:
            plan.has_until = True
        if shape.ignored_before is not None:
            plan.ignore.append((shape.name, shape.ignored_before))
            plan.gated_below = max(plan.gated_below, shape.ignored_before)
    return plan


# ------------------------------------------------------------------------------------------------- answers


@dataclass(slots=True)
class AnswerShape:
    """How to strip an answer type for an older version: fields to drop below a version, nested shapes."""

    drop: list[tuple[str, int]] = field(default_factory=list)  # (wire name, since)
    nested: list[tuple[str, bool, AnswerShape]] = field(default_factory=list)
    full_from: int = 0  # this version and newer get every field

    def strip(self, data: dict[str, Any], version: int) -> None:
        for wire_name, since in self.drop:
            if version < since:
                data.pop(wire_name, None)
        for wire_name, is_list, shape in self.nested:
            value = data.get(wire_name)
            if value is None or version >= shape.full_from:
                continue
            for item in value if is_list else (value,):
                shape.strip(item, version)


_shapes: dict[type, AnswerShape] = {}


def shape_of(struct: type) -> AnswerShape:
    shape = _shapes.get(struct)
    if shape is not None:
        return shape
    shape = _shapes[struct] = AnswerShape()
    for f in field_shapes(struct):
        if f.since is not None:
            shape.drop.append((f.wire_name, f.since))
            shape.full_from = max(shape.full_from, f.since)
        if f.item is not None:
            inner = shape_of(f.item)
            if inner.full_from:
                shape.nested.append((f.wire_name, f.kind == "structs", inner))
                shape.full_from = max(shape.full_from, inner.full_from)
    if issubclass(struct, Answer):
        shape.full_from = max(shape.full_from, struct.adapted_below)
    return shape
