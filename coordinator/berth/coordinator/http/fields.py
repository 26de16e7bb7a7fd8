"""Typed readers for JSON request fields, each failing with a 400 that names the field (by its path).

JSON has one number type; Kafka's fields are int16/int32/int64 and booleans are not numbers, so every
integer is checked for type and range here. Strings are bounded in UTF-8 bytes so that a hostile id cannot
grow memory, logs or the journal without limit.
"""

from __future__ import annotations

import base64
import binascii
from typing import Any, TypeVar

from berth.coordinator.http.errors import bad_request

INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1

T = TypeVar("T")
_MISSING: Any = object()


class Fields:
    """A JSON object being read, with the path used in error messages (``protocols[2].name``).

    The path is kept as (parent, key, index) and only spelled out when an error needs it: a leader's sync
    carries thousands of objects, and none of them should pay for a string nobody reads.
    """

    __slots__ = ("_index", "_key", "_obj", "_parent", "max_string_bytes")

    def __init__(
        self,
        obj: Any,
        path: str = "",
        max_string_bytes: int = 1024,
        *,
        parent: Fields | None = None,
        key: str = "",
        index: int = -1,
    ) -> None:
        self._parent = parent
        self._key = key or path
        self._index = index
        self.max_string_bytes = max_string_bytes
        if not isinstance(obj, dict):
            raise bad_request(f"{self.path or 'body'}: must be a JSON object")
        self._obj: dict[str, Any] = obj

    @property
    def path(self) -> str:
        if self._parent is None:
            return self._key
        return f"{self._parent.name(self._key)}[{self._index}]"

    def name(self, key: str) -> str:
        path = self.path
        return f"{path}.{key}" if path else key

    @property
    def obj(self) -> dict[str, Any]:
        return self._obj

    def has(self, key: str) -> bool:
        return key in self._obj

    def present_non_null(self, key: str) -> bool:
        return self._obj.get(key) is not None

    def raw(self, key: str) -> Any:
        return self._obj.get(key)

    def _get(self, key: str, required: bool) -> Any:
        if key not in self._obj:
            if required:
                raise bad_request(f"{self.name(key)}: required field is missing")
            return _MISSING
        return self._obj[key]

    # ---------------------------------------------------------------------------------------- numbers

    def int_(
        self, key: str, *, required: bool = False, default: int = 0, lo: int = INT32_MIN, hi: int = INT32_MAX
    ) -> int:
        value = self._get(key, required)
        if value is _MISSING:
            return default
        if isinstance(value, bool) or not isinstance(value, int):
            raise bad_request(f"{self.name(key)}: must be an integer, got {_kind(value)}")
        if not lo <= value <= hi:
            raise bad_request(f"{self.name(key)}: {value} is out of range [{lo}, {hi}]")
        return value

    def int32(self, key: str, *, required: bool = False, default: int = 0, lo: int = INT32_MIN) -> int:
        return self.int_(key, required=required, default=default, lo=lo, hi=INT32_MAX)

    def int64(self, key: str, *, required: bool = False, default: int = 0) -> int:
        return self.int_(key, required=required, default=default, lo=INT64_MIN, hi=INT64_MAX)

    # ---------------------------------------------------------------------------------------- strings

    def _check_str(self, name: str, value: Any) -> str:
        if not isinstance(value, str):
            raise bad_request(f"{name}: must be a string, got {_kind(value)}")
        if value.isascii():  # the common case: one byte per character, no surrogates possible
            size = len(value)
        else:
            try:
                size = len(value.encode("utf-8"))
            except UnicodeEncodeError:
                raise bad_request(f"{name}: contains an unpaired surrogate") from None
        if size > self.max_string_bytes:
            raise bad_request(f"{name}: {size} bytes is longer than the {self.max_string_bytes}-byte limit")
        return value

    def str_(self, key: str, *, required: bool = False, default: str = "") -> str:
        value = self._get(key, required)
        if value is _MISSING:
            return default
        return self._check_str(self.name(key), value)

    def nullable_str(self, key: str) -> str | None:
        value = self._obj.get(key)
        return None if value is None else self._check_str(self.name(key), value)

    def bytes_(self, key: str, *, required: bool = False) -> bytes:
        value = self._get(key, required)
        if value is _MISSING or value is None:
            return b""
        if not isinstance(value, str):
            raise bad_request(f"{self.name(key)}: must be a base64 string, got {_kind(value)}")
        try:
            return base64.b64decode(value, validate=True)
        except (binascii.Error, ValueError):
            raise bad_request(f"{self.name(key)}: not valid standard padded base64") from None

    def bool_(self, key: str, *, default: bool = False) -> bool:
        value = self._obj.get(key, default)
        if not isinstance(value, bool):
            raise bad_request(f"{self.name(key)}: must be true or false, got {_kind(value)}")
        return value

    # ------------------------------------------------------------------------------------------ lists

    def objects(self, key: str, *, required: bool = False, max_items: int) -> list[Fields]:
        items = self.list_(key, required=required, max_items=max_items)
        limit = self.max_string_bytes
        return [Fields(item, "", limit, parent=self, key=key, index=i) for i, item in enumerate(items)]

    def strings(self, key: str, *, required: bool = False, max_items: int) -> list[str]:
        items = self.list_(key, required=required, max_items=max_items)
        return [self._check_str(f"{self.name(key)}[{i}]", v) for i, v in enumerate(items)]

    def list_(self, key: str, *, required: bool = False, max_items: int) -> list[Any]:
        value = self._get(key, required)
        if value is _MISSING:
            return []
        if not isinstance(value, list):
            raise bad_request(f"{self.name(key)}: must be a list, got {_kind(value)}")
        if len(value) > max_items:
            raise bad_request(f"{self.name(key)}: {len(value)} items is more than the limit of {max_items}")
        return value


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__
