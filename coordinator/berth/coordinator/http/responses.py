"""HTTP responses: answers encoded for their request's version, error bodies, and bodies encoded once.

Every body is JSON (``Content-Type: application/json``) except ``/metrics``. Answers that are only an error
(heartbeat, delete) have a body per error code, encoded at import: the hottest route encodes nothing.
"""

from __future__ import annotations

from typing import Any

import msgspec
from aiohttp import web

from berth.coordinator.http.errors import HttpError
from berth.coordinator.protocol import DeleteResponse, Error, HeartbeatResponse
from berth.coordinator.protocol.codec import encode, encode_answer

JSON = "application/json"

_ERROR_ONLY_BODIES: dict[Error, bytes] = {error: encode(HeartbeatResponse(error)) for error in Error}
_ERROR_ONLY_ANSWERS = (HeartbeatResponse, DeleteResponse)  # no field but the error, in every version


def json_response(body: bytes, status: int = 200) -> web.Response:
    return web.Response(body=body, status=status, content_type=JSON)


def answer_response(answer: msgspec.Struct, version: int) -> web.Response:
    """An in-band answer (HTTP 200) as a request of ``version`` gets it (docs/api.md §3)."""
    if isinstance(answer, _ERROR_ONLY_ANSWERS):
        return web.Response(body=_ERROR_ONLY_BODIES[answer.error], content_type=JSON)
    return web.Response(body=encode_answer(answer, version), content_type=JSON)


def not_served(answer: msgspec.Struct, version: int) -> web.Response:
    """The in-band refusal of a replica that does not serve: NOT_COORDINATOR (a standby) also closes the connection,
    so that the client's next request opens a new one, which the Service routes to the active replica."""
    response = answer_response(answer, version)
    if getattr(answer, "error", None) is Error.NOT_COORDINATOR:
        response.force_close()
    return response


def struct_response(value: msgspec.Struct | dict[str, Any], status: int = 200) -> web.Response:
    return web.Response(body=encode(value), status=status, content_type=JSON)


def error_response(error: HttpError) -> web.Response:
    response = web.Response(body=encode(error.body()), status=error.status, content_type=JSON)
    if error.close_connection:
        response.force_close()  # don't read (or wait for) the rest of a body we refused
    return response
