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
from collections.abc import Iterator
from typing import Any, Generic, TypeVar

import msgspec

from berth.coordinator.protocol.base import Answer, Body, InvalidRequest, UnsupportedVersion
from berth.coordinator.protocol.fields import join_path, plan_of, shape_of
from berth.coordinator.protocol.limits import Limits
from berth.coordinator.protocol.versions import API_VERSIONS

B = TypeVar("B", bound=Body)

_encoder = msgspec.json.Encoder()
encode = _encoder.encode


class CarriesTooNew(Exception):
    """A request carries a non-null value its version cannot carry: answered in-band UNSUPPORTED_VERSION."""

    def __init__(self, request: Body, version: int) -> None:
        super().__init__(f"{type(request).__name__} v{version} carries a field of a newer version")
        self.request = request
        self.version = version


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
        return f"{join_path(path, missing.group(1))}: required field is missing"
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
            yield from _surrogate_paths(item, join_path(path, key))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from _surrogate_paths(item, f"{path}[{i}]")


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
