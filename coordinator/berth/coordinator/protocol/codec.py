"""JSON bytes <-> the declared messages: decode, validate and encode, driven by the declarations' markers.

Decoding a request body (``RequestCodec.decode``), in this order:
1. JSON and types (msgspec): malformed JSON, a missing required field or a wrong type is ``InvalidRequest``
   naming the field (an out-of-range ``api_version`` is reported first, as ``UnsupportedVersion``);
2. ``api_version`` against the route family's range (``UnsupportedVersion``);
3. ``Limits``: id strings in UTF-8 bytes, list lengths (``InvalidRequest`` naming the field);
4. the message's own rules (``Body.validate``: duplicate protocol names, leave's per-version required field ...);
5. version gates: a non-null value in a field the version cannot carry (``Since``/``Until``) raises
   ``CarriesTooNew`` (answered in-band UNSUPPORTED_VERSION); ``IgnoredBefore`` fields are dropped.

Encoding an answer (``encode_answer``): the newest version encodes the struct as it is; an older one gets
``Answer.for_version`` and then loses every field whose ``Since`` it predates, at any depth (docs/api.md §3).
"""

from __future__ import annotations

import json
import re
import types
import typing
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

import msgspec

from berth.coordinator.protocol.base import Answer, Body, InvalidRequest, UnsupportedVersion
from berth.coordinator.protocol.limits import Limits, ListBound, Unbounded
from berth.coordinator.protocol.versions import API_VERSIONS, IgnoredBefore, Since, Until

B = TypeVar("B", bound=Body)

_encoder = msgspec.json.Encoder()
encode = _encoder.encode


class CarriesTooNew(Exception):
    """A request carries a non-null value its version cannot carry: answered in-band UNSUPPORTED_VERSION."""

    def __init__(self, request: Body, version: int) -> None:
        super().__init__(f"{type(request).__name__} v{version} carries a field of a newer version")
        self.request = request
        self.version = version


# ------------------------------------------------------------------------------------------ field analysis


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


Check = Callable[[Any, Limits, Callable[[], str]], None]


def _string_size(value: str) -> int:
    return len(value) if value.isascii() else len(value.encode("utf-8"))


def _too_long(path: str, size: int, limit: int) -> InvalidRequest:
    return InvalidRequest(f"{path}: {size} bytes is longer than the {limit}-byte limit")


@dataclass(slots=True)
class _Plan:
    """The checks of one struct type, compiled once from its declaration."""

    strings: list[str] = field(default_factory=list)
    string_lists: list[tuple[str, str]] = field(default_factory=list)
    lists: list[tuple[str, str, _Plan | None]] = field(default_factory=list)
    structs: list[tuple[str, _Plan]] = field(default_factory=list)
    refuse: list[tuple[str, int | None, int | None]] = field(default_factory=list)  # (field, since, until)
    ignore: list[tuple[str, int]] = field(default_factory=list)
    nested_gates: list[tuple[str, bool, _Plan]] = field(default_factory=list)  # (field, is list, plan)
    gated_below: int = 0  # versions below this may trip a Since/IgnoredBefore gate
    has_until: bool = False

    def check_limits(self, obj: Any, limits: Limits, path: str) -> None:
        for name in self.strings:
            value = getattr(obj, name)
            if value is not None and (size := _string_size(value)) > limits.max_id_bytes:
                raise _too_long(_join(path, name), size, limits.max_id_bytes)
        for name, limit_name in self.string_lists:
            values = getattr(obj, name)
            _check_length(values, limits, limit_name, _join(path, name))
            for i, value in enumerate(values):
                if (size := _string_size(value)) > limits.max_id_bytes:
                    raise _too_long(f"{_join(path, name)}[{i}]", size, limits.max_id_bytes)
        for name, limit_name, item_plan in self.lists:
            values = getattr(obj, name)
            if values is None:
                continue
            _check_length(values, limits, limit_name, _join(path, name))
            if item_plan is not None:
                for i, value in enumerate(values):
                    item_plan.check_limits(value, limits, f"{_join(path, name)}[{i}]")
        for name, item_plan in self.structs:
            value = getattr(obj, name)
            if value is not None:
                item_plan.check_limits(value, limits, _join(path, name))

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


def _join(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def _check_length(values: Sequence[Any], limits: Limits, limit_name: str, path: str) -> None:
    limit = getattr(limits, limit_name)
    if len(values) > limit:
        raise InvalidRequest(f"{path}: {len(values)} items is more than the limit of {limit}")


_plans: dict[type, _Plan] = {}


def plan_of(struct: type) -> _Plan:
    plan = _plans.get(struct)
    if plan is not None:
        return plan
    plan = _plans[struct] = _Plan()
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


# ------------------------------------------------------------------------------------------------ requests


def api_version_of(value: int | None, api: str) -> int:
    """The request's version (absent: the newest); outside the family's range is ``UnsupportedVersion``."""
    lo, hi = API_VERSIONS[api]
    if value is None:
        return hi
    if not lo <= value <= hi:
        raise UnsupportedVersion(f"api_version: {value} is not supported by {api} (versions {lo} to {hi})")
    return value


def query_api_version(raw: str | None, api: str) -> int:
    """``?api_version=N`` of a GET or DELETE route: the same rules as in a body (docs/api.md §3)."""
    return api_version_of(None if raw is None else query_int(raw, "api_version", lo=None, hi=None), api)


def query_int(raw: str, name: str, lo: int | None = 0, hi: int | None = 2**63 - 1) -> int:
    try:
        value = int(raw, 10)
    except ValueError:
        raise InvalidRequest(f"{name}: must be a decimal integer, got {raw[:40]!r}") from None
    if (lo is not None and value < lo) or (hi is not None and value > hi):
        raise InvalidRequest(f"{name}: {value} is out of range [{lo}, {hi}]")
    return value


class RequestCodec(Generic[B]):
    """Decodes and validates one request type; ``api`` names its version range (None: an unversioned body)."""

    def __init__(self, body_type: type[B], api: str | None = None) -> None:
        self.type = body_type
        self.api = api
        self._decoder = msgspec.json.Decoder(body_type)
        self._plan = plan = plan_of(body_type)
        self._versions = API_VERSIONS[api] if api is not None else (0, 0)
        # A body no longer than the id limit holds no longer string (a JSON string is at least as long as its
        # UTF-8): types without lists can skip the walk for such bodies, which is nearly every heartbeat.
        self._strings_only = not (plan.lists or plan.string_lists or plan.structs)
        self._has_rules = body_type.validate is not Body.validate

    def decode(self, raw: bytes, limits: Limits) -> tuple[B, int]:
        """The validated request and its version; raises ``InvalidRequest``, ``UnsupportedVersion`` or
        ``CarriesTooNew``."""
        if not raw:
            raise InvalidRequest("body: empty, expected a JSON object")
        try:
            body = self._decoder.decode(raw)
        except msgspec.ValidationError as exc:
            self._version_first(raw)
            raise InvalidRequest(validation_message(exc)) from None
        except (msgspec.DecodeError, RecursionError, UnicodeDecodeError):
            raise InvalidRequest(malformed_message(raw)) from None
        version = 0
        if self.api is not None:
            requested: int | None = getattr(body, "api_version", None)
            lo, hi = self._versions
            if requested is None:
                version = hi
            elif lo <= requested <= hi:
                version = requested
            else:
                api_version_of(requested, self.api)  # raises UnsupportedVersion
        plan = self._plan
        if not (self._strings_only and len(raw) <= limits.max_id_bytes):
            plan.check_limits(body, limits, "")
        if self._has_rules:
            body.validate(version, limits)
        if version < plan.gated_below or plan.has_until:
            if plan.carries_too_new(body, version):
                raise CarriesTooNew(body, version)
            body = plan.without_ignored(body, version)
        return body, version

    def _version_first(self, raw: bytes) -> None:
        """Kafka checks the version before the fields: an unsupported one is reported even in a bad body."""
        if self.api is None:
            return
        try:
            document = json.loads(raw)
        except (ValueError, RecursionError):
            return
        version = document.get("api_version") if isinstance(document, dict) else None
        if isinstance(version, int) and not isinstance(version, bool):
            api_version_of(version, self.api)


_AT = re.compile(r" - at `\$(.*)`$")
_MISSING = re.compile(r"^Object missing required field `(.+)`$")


def validation_message(exc: msgspec.ValidationError) -> str:
    """msgspec's message, led by the offending field's path (``protocols[0].name: ...``)."""
    text = str(exc)
    at = _AT.search(text)
    path = at.group(1).lstrip(".") if at else ""
    text = text[: at.start()] if at else text
    missing = _MISSING.match(text)
    if missing:
        return f"{_join(path, missing.group(1))}: required field is missing"
    return f"{path or 'body'}: {text[0].lower()}{text[1:]}"


def malformed_message(raw: bytes) -> str:
    """Why a body is not JSON msgspec reads; the standard library finds out which field, where it can."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return "body: not valid UTF-8"

    def reject_constant(name: str) -> None:
        raise ValueError(f"{name} is not a JSON number")

    try:
        document = json.loads(text, parse_constant=reject_constant)
    except RecursionError:
        return "body: JSON nested too deeply"
    except ValueError as exc:
        return f"body: not valid JSON ({str(exc)[:120]})"
    for path in _surrogate_paths(document, ""):
        return f"{path or 'body'}: contains an unpaired surrogate"
    return "body: not valid JSON"


def _surrogate_paths(value: Any, path: str) -> Iterator[str]:
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            yield path
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _surrogate_paths(key, path)
            yield from _surrogate_paths(item, _join(path, key))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from _surrogate_paths(item, f"{path}[{i}]")


# ------------------------------------------------------------------------------------------------- answers


@dataclass(slots=True)
class _Shape:
    """How to strip an answer type for an older version: fields to drop below a version, nested shapes."""

    drop: list[tuple[str, int]] = field(default_factory=list)  # (wire name, since)
    nested: list[tuple[str, bool, _Shape]] = field(default_factory=list)
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


_shapes: dict[type, _Shape] = {}


def shape_of(struct: type) -> _Shape:
    shape = _shapes.get(struct)
    if shape is not None:
        return shape
    shape = _shapes[struct] = _Shape()
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


def encode_answer(answer: msgspec.Struct, version: int) -> bytes:
    """The JSON body of ``answer`` for a request of ``version`` (docs/api.md §3: older versions get less)."""
    shape = shape_of(type(answer))
    if version >= shape.full_from:
        return encode(answer)
    if isinstance(answer, Answer):
        answer = answer.for_version(version)
    data = msgspec.to_builtins(answer)
    shape.strip(data, version)
    return encode(data)
