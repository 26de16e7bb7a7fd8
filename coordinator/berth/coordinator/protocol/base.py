"""The shapes every message shares: request bodies, in-band answers, and the integer types of Kafka's fields.

- A request body (``Body``) is immutable; unknown fields are ignored (forward compatibility), a missing required
  field or a wrong type is a 400 naming it (docs/api.md §5).
- An answer (``Answer``) starts with Kafka's error: ``error`` (an ``Error``) goes on the wire as ``error_code``,
  its name as ``error`` (``error_name``: keyword-only and filled in, so it comes last). ``for_version`` adapts an
  answer to an older request version where a rule says more than "drop the fields that version lacks" (the
  generic part is ``codec``'s, driven by ``Since``).
- Byte fields are ``bytes`` here and standard padded base64 on the wire.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, ClassVar, Self

import msgspec

from berth.coordinator.protocol.errors import Error
from berth.coordinator.protocol.limits import INT32_MAX, INT32_MIN, INT64_MAX, INT64_MIN, Limits

Int32 = Annotated[int, msgspec.Meta(ge=INT32_MIN, le=INT32_MAX)]
Int64 = Annotated[int, msgspec.Meta(ge=INT64_MIN, le=INT64_MAX)]
NonNegativeInt32 = Annotated[int, msgspec.Meta(ge=0, le=INT32_MAX)]
ApiVersion = Annotated[
    int | None, msgspec.Meta(description="Kafka API version of the request; absent = the newest (docs/api.md §3)")
]


class InvalidRequest(ValueError):
    """A request that is not one (HTTP 400 INVALID_REQUEST); the message starts with the offending field."""


class UnsupportedVersion(InvalidRequest):
    """An ``api_version`` outside the route's range (HTTP 400 UNSUPPORTED_VERSION)."""


class Body(msgspec.Struct, frozen=True, gc=False):
    """A request body."""

    def validate(self, version: int, limits: Limits) -> None:
        """The message's own rules beyond types and limits; raises ``InvalidRequest`` naming the field."""


class _FillsErrorName:
    if not TYPE_CHECKING:  # a slot-less mixin, so that structs stay without __dict__ (mypy: plain attributes)
        __slots__ = ()
    error: Error
    error_name: str

    def __post_init__(self) -> None:
        if not self.error_name:
            self.error_name = self.error.name


class NamedError(_FillsErrorName, msgspec.Struct, kw_only=True, gc=False):
    """A result carrying Kafka's error: the subclass declares ``error`` (the wire's ``error_code``) where it
    belongs; ``error_name`` (the wire's ``error``) is keyword-only and filled in from it."""

    error_name: str = msgspec.field(default="", name="error")


class Answer(NamedError):
    """An in-band answer (HTTP 200): Kafka's error first, then the API's fields, all with Kafka's defaults."""

    error: Error = msgspec.field(name="error_code")

    #: Versions below this one get ``for_version``'s adaptation (0: there is none).
    adapted_below: ClassVar[int] = 0

    def for_version(self, version: int) -> Self:
        """This answer as a request of ``version`` gets it, before fields ``version`` lacks are dropped."""
        return self
