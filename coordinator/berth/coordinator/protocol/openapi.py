"""The OpenAPI 3.1 document of the coordinator, generated from the route table and the message declarations.

Nothing in it is written by hand: paths come from ``routes.ROUTES``, schemas from the very types the server
decodes and encodes with (msgspec's JSON Schema, plus the markers: version gates become ``x-since``/``x-until``,
limits become ``maxItems``). ``docs/openapi.json`` is this document for the default flags, checked in; a test
fails when it drifts (``python -m berth.coordinator.protocol.openapi > docs/openapi.json`` rewrites it).
"""

from __future__ import annotations

import inspect
import json
import sys
from typing import Any

import msgspec

from berth.coordinator.protocol.admin import GroupOwnedBody, HttpErrorBody
from berth.coordinator.protocol.base import Answer
from berth.coordinator.protocol.errors import Error
from berth.coordinator.protocol.fields import field_shapes
from berth.coordinator.protocol.limits import Limits
from berth.coordinator.protocol.routes import ROUTES, Access, Route
from berth.coordinator.protocol.versions import API_VERSIONS

JSON = "application/json"
REF = "#/components/schemas/{name}"


def _ref(struct: type) -> dict[str, Any]:
    return {"$ref": REF.format(name=struct.__name__)}


def _error(description: str) -> dict[str, Any]:
    return {"description": description, "content": {JSON: {"schema": _ref(HttpErrorBody)}}}


def _responses(route: Route, auth: bool) -> dict[str, Any]:
    if route.answer is None:
        ok: dict[str, Any] = {"description": "ok", "content": {"text/plain": {"schema": {"type": "string"}}}}
    else:
        ok = {
            "description": "answered (protocol outcomes are in-band)",
            "content": {JSON: {"schema": _ref(route.answer)}},
        }
    if route.access is Access.OPEN and route.request is None:
        responses = {"200": ok}
        if route.operation == "readyz":
            responses["503"] = {
                "description": "loading, stopping, or the store failing (a write failed, a group not read back)",
                "content": ok["content"],
            }
        return responses
    responses = {
        "200": ok,
        "400": _error(
            "not a valid request (INVALID_REQUEST 42, or UNSUPPORTED_VERSION 35); the message names the field"
        ),
        "503": _error("the coordinator is shutting down (COORDINATOR_NOT_AVAILABLE 15)"),
    }
    if route.request is not None:
        responses["408"] = _error("the body did not arrive within --body-timeout-s")
        responses["413"] = _error("body over --max-body-bytes")
        responses["415"] = _error("Content-Type is not application/json")
    if route.owned:
        responses["409"] = {
            "description": "GROUP_OWNED: the group belongs to another owner, or to none and is in use (§7a)",
            "content": {JSON: {"schema": _ref(GroupOwnedBody)}},
        }
    if auth and route.access is not Access.OPEN:
        responses["401"] = _error("no or unknown bearer token (GROUP_AUTHORIZATION_FAILED 30)")
        responses["403"] = _error("the token may not use this group or route (GROUP_AUTHORIZATION_FAILED 30)")
    return responses


def _parameters(route: Route) -> list[dict[str, Any]]:
    parameters: list[dict[str, Any]] = []
    if route.takes_group:
        parameters.append(
            {
                "name": "group_id",
                "in": "path",
                "required": True,
                "description": "1 to 255 bytes of UTF-8, percent-encoded; longer is INVALID_GROUP_ID in-band",
                "schema": {"type": "string", "minLength": 1},
            }
        )
    if route.api is not None and route.request is None:
        lo, hi = API_VERSIONS[route.api]
        parameters.append(
            {
                "name": "api_version",
                "in": "query",
                "description": "absent: the newest; outside the range: 400 UNSUPPORTED_VERSION",
                "schema": {"type": "integer", "minimum": lo, "maximum": hi},
            }
        )
    for q in route.query:
        parameter: dict[str, Any] = {"name": q.name, "in": q.location, "schema": q.schema}
        if q.repeated:
            parameter.update(schema={"type": "array", "items": q.schema}, style="form", explode=True)
        if q.description:
            parameter["description"] = q.description
        parameters.append(parameter)
    return parameters


def _operation(route: Route, auth: bool) -> dict[str, Any]:
    operation: dict[str, Any] = {"operationId": route.operation, "summary": route.summary}
    parameters = _parameters(route)
    if parameters:
        operation["parameters"] = parameters
    if route.request is not None:
        operation["requestBody"] = {"required": True, "content": {JSON: {"schema": _ref(route.request)}}}
    operation["responses"] = _responses(route, auth)
    if route.api is not None:
        operation["x-api-versions"] = list(API_VERSIONS[route.api])
    if route.long_poll:
        operation["x-long-poll"] = True
    if route.access is Access.OPEN:
        operation["security"] = []
    return operation


def _annotate(schemas: dict[str, Any], types: list[type], limits: Limits) -> None:
    """Add what msgspec's JSON Schema cannot know: version gates, runtime limits, always-present answer fields."""
    for struct in types:
        schema = schemas.get(struct.__name__)
        if schema is None:
            continue
        if "description" in schema:  # msgspec before 0.23 kept a docstring's indentation, later ones drop it
            schema["description"] = inspect.cleandoc(schema["description"])
        if "properties" not in schema:
            continue
        always = []
        for shape in field_shapes(struct):
            prop = schema["properties"][shape.wire_name]
            if shape.kind == "bytes" or prop.get("contentEncoding") == "base64":
                prop["format"] = "byte"
            if shape.since is not None:
                prop["x-since"] = shape.since
            if shape.until is not None:
                prop["x-until"] = shape.until
            if shape.ignored_before is not None:
                prop["x-ignored-before"] = shape.ignored_before
            if shape.kind in ("structs", "strs"):
                target = prop
                for alternative in prop.get("anyOf", ()):
                    if alternative.get("type") == "array":
                        target = alternative
                target["maxItems"] = getattr(limits, shape.list_limit)
            if shape.since is None:
                always.append(shape.wire_name)
        if issubclass(struct, Answer):
            schema["required"] = always  # an answer always carries every field its version has
    errors = schemas.get(Error.__name__)
    if errors is not None:
        errors["description"] = ", ".join(f"{e.name} {e.value}" for e in Error)


def _all_structs(roots: list[type]) -> list[type]:
    seen: dict[type, None] = {}

    def visit(struct: type) -> None:
        if struct in seen or not (isinstance(struct, type) and issubclass(struct, msgspec.Struct)):
            return
        seen[struct] = None
        for shape in field_shapes(struct):
            if shape.item is not None:
                visit(shape.item)

    for root in roots:
        visit(root)
    return list(seen)


def openapi_document(*, manual_clock: bool = False, auth: bool = False, limits: Limits | None = None) -> dict[str, Any]:
    """The document for a coordinator with these flags; the defaults give the checked-in ``docs/openapi.json``."""
    limits = limits or Limits()
    routes = [r for r in ROUTES if r.documented and (manual_clock or not r.test_only)]
    paths: dict[str, dict[str, Any]] = {}
    for route in routes:
        paths.setdefault(route.path, {})[route.method.lower()] = _operation(route, auth)
    roots: list[type] = [HttpErrorBody, GroupOwnedBody]
    for route in routes:
        roots += [t for t in (route.request, route.answer) if isinstance(t, type) and issubclass(t, msgspec.Struct)]
    types = _all_structs(roots)
    _, schemas = msgspec.json.schema_components(types, ref_template=REF)
    _annotate(schemas, types, limits)
    document: dict[str, Any] = {
        "openapi": "3.1.0",
        "info": {
            "title": "Berth coordinator",
            "version": "1",
            "description": (
                "Kafka's classic group coordinator (KIP-345/394/814) over HTTP/JSON. The contract, in words: "
                "docs/api.md in the Berth repository."
            ),
        },
        "paths": paths,
        "components": {"schemas": dict(sorted(schemas.items()))},
    }
    if auth:
        document["components"]["securitySchemes"] = {"bearer": {"type": "http", "scheme": "bearer"}}
        document["security"] = [{"bearer": []}]
    return document


def render(document: dict[str, Any]) -> str:
    """The document as checked in: indented, keys in a stable order."""
    return json.dumps(document, indent=2, sort_keys=False) + "\n"


if __name__ == "__main__":
    sys.stdout.write(render(openapi_document()))
