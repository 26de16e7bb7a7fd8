"""The OpenAPI 3.0 document of the coordinator (``GET /v1/openapi.json``), generated from ``schemas``.

Generated, not written: request bodies come from the very models ``decode`` validates with, and responses from
the models the tests check every answer against (schemathesis), so the document stays true to the code.
"""

from __future__ import annotations

from typing import Any

from berth.coordinator.http import schemas
from berth.coordinator.http.decode import Limits
from berth.coordinator.http.schemas import Field, Model
from berth.coordinator.protocol import API_VERSIONS

JSON = "application/json"


def _field_schema(f: Field, limits: Limits) -> dict[str, Any]:
    if f.kind == "string":
        schema: dict[str, Any] = {"type": "string"}
    elif f.kind in ("int32", "int64"):
        schema = {"type": "integer", "format": f.kind}
        if f.minimum is not None:
            schema["minimum"] = f.minimum
        if f.maximum is not None:
            schema["maximum"] = f.maximum
    elif f.kind == "bytes":
        schema = {"type": "string", "format": "byte"}
    elif f.kind == "boolean":
        schema = {"type": "boolean"}
    elif f.kind == "object":
        schema = {"type": "object"}
    elif f.kind == "strings":
        schema = {"type": "array", "items": {"type": "string"}, "maxItems": getattr(limits, f.limit)}
    else:
        assert f.items is not None
        schema = {"type": "array", "items": {"$ref": f"#/components/schemas/{f.items.name}"}}
        schema["maxItems"] = getattr(limits, f.limit)
    if f.nullable:
        schema["nullable"] = True
    if f.description:
        schema["description"] = f.description
    return schema


def _model_schema(model: Model, limits: Limits) -> dict[str, Any]:
    schema: dict[str, Any] = {
        "type": "object",
        "properties": {f.name: _field_schema(f, limits) for f in model.fields},
    }
    required = [f.name for f in model.fields if f.required]
    if required:
        schema["required"] = required
    if model.description:
        schema["description"] = model.description
    return schema


def _models(model: Model, seen: dict[str, Model]) -> None:
    if model.name in seen:
        return
    seen[model.name] = model
    for f in model.fields:
        if f.items is not None:
            _models(f.items, seen)


def _ref(model: Model) -> dict[str, Any]:
    return {"$ref": f"#/components/schemas/{model.name}"}


def _body(model: Model) -> dict[str, Any]:
    return {"required": True, "content": {JSON: {"schema": _ref(model)}}}


def _responses(ok: Model | None, *, with_body: bool, auth: bool, ok_type: str = JSON) -> dict[str, Any]:
    error = {"content": {JSON: {"schema": _ref(schemas.HTTP_ERROR)}}}
    responses: dict[str, Any] = {
        "200": {"description": "answered (protocol outcomes are in-band)"},
        "400": {"description": "not a valid request; the message names the field", **error},
        "503": {"description": "the coordinator is shutting down", **error},
    }
    responses["200"]["content"] = {ok_type: {"schema": _ref(ok) if ok else {"type": "string"}}}
    if with_body:
        responses["413"] = {"description": "body over --max-body-bytes", **error}
        responses["415"] = {"description": "Content-Type is not application/json", **error}
    if auth:
        responses["401"] = {"description": "no or unknown bearer token", **error}
        responses["403"] = {"description": "token not allowed here", **error}
    return responses


def _group_param() -> dict[str, Any]:
    return {
        "name": "group_id",
        "in": "path",
        "required": True,
        "description": "1 to 255 bytes of UTF-8, percent-encoded; longer is INVALID_GROUP_ID in-band",
        "schema": {"type": "string", "minLength": 1},
    }


def _version_param(api: str) -> dict[str, Any]:
    lo, hi = API_VERSIONS[api]
    return {"name": "api_version", "in": "query", "schema": {"type": "integer", "minimum": lo, "maximum": hi}}


def openapi_document(*, manual_clock: bool, auth: bool, limits: Limits) -> dict[str, Any]:
    group = "/v1/groups/{group_id}"
    post_routes = [
        ("join", f"{group}/join", schemas.JOIN_REQUEST, schemas.JOIN_RESPONSE, "JoinGroup (long-poll)"),
        ("sync", f"{group}/sync", schemas.SYNC_REQUEST, schemas.SYNC_RESPONSE, "SyncGroup (long-poll)"),
        ("heartbeat", f"{group}/heartbeat", schemas.HEARTBEAT_REQUEST, schemas.ERROR_ONLY, "Heartbeat"),
        ("leave", f"{group}/leave", schemas.LEAVE_REQUEST, schemas.LEAVE_RESPONSE, "LeaveGroup"),
        ("offsets", f"{group}/offsets", schemas.COMMIT_REQUEST, schemas.COMMIT_RESPONSE, "OffsetCommit"),
    ]
    paths: dict[str, dict[str, Any]] = {}
    for api, path, request, response, summary in post_routes:
        lo, hi = API_VERSIONS[api]
        paths.setdefault(path, {})["post"] = {
            "operationId": api,
            "summary": summary,
            "parameters": [_group_param()],
            "requestBody": _body(request),
            "responses": _responses(response, with_body=True, auth=auth),
            "x-api-versions": [lo, hi],
        }
    topics = {"name": "topic", "in": "query", "schema": {"type": "array", "items": {"type": "string"}}}
    paths.setdefault(f"{group}/offsets", {})["get"] = {
        "operationId": "offset_fetch",
        "summary": "OffsetFetch",
        "parameters": [_group_param(), _version_param("offset_fetch"), {**topics, "style": "form", "explode": True}],
        "responses": _responses(schemas.FETCH_RESPONSE, with_body=False, auth=auth),
    }
    paths[group] = {
        "get": {
            "operationId": "describe",
            "summary": "DescribeGroups",
            "parameters": [_group_param(), _version_param("describe")],
            "responses": _responses(schemas.DESCRIBE_RESPONSE, with_body=False, auth=auth),
        },
        "delete": {
            "operationId": "delete",
            "summary": "DeleteGroups (admin)",
            "parameters": [_group_param(), _version_param("delete")],
            "responses": _responses(schemas.ERROR_ONLY, with_body=False, auth=auth),
        },
    }
    paths[f"{group}/expected-members"] = {
        "put": {
            "operationId": "expected_members_put",
            "summary": "Pre-register the group's static members (admin, API.md §4)",
            "parameters": [_group_param()],
            "requestBody": _body(schemas.EXPECTED_MEMBERS_REQUEST),
            "responses": _responses(schemas.EXPECTED_MEMBERS_RESPONSE, with_body=True, auth=auth),
        },
        "get": {
            "operationId": "expected_members_get",
            "parameters": [_group_param()],
            "responses": _responses(schemas.EXPECTED_MEMBERS_RESPONSE, with_body=False, auth=auth),
        },
        "delete": {
            "operationId": "expected_members_delete",
            "parameters": [_group_param()],
            "responses": _responses(schemas.EXPECTED_MEMBERS_RESPONSE, with_body=False, auth=auth),
        },
    }
    states = {"name": "state", "in": "query", "schema": {"type": "array", "items": {"type": "string"}}}
    paths["/v1/groups"] = {
        "get": {
            "operationId": "list",
            "summary": "ListGroups (admin)",
            "parameters": [_version_param("list"), {**states, "style": "form", "explode": True}],
            "responses": _responses(schemas.LIST_RESPONSE, with_body=False, auth=auth),
        }
    }
    paths["/v1/config"] = {
        "get": {
            "operationId": "config",
            "responses": _responses(schemas.CONFIG_RESPONSE, with_body=False, auth=auth),
        }
    }
    paths["/v1/journal"] = {
        "get": {
            "operationId": "journal",
            "summary": "The membership journal (admin, API.md §5)",
            "parameters": [
                {"name": "after", "in": "query", "schema": {"type": "integer", "minimum": 0}},
                {"name": "limit", "in": "query", "schema": {"type": "integer", "minimum": 0, "maximum": 10_000}},
            ],
            "responses": _responses(None, with_body=False, auth=auth) | {"200": _journal_ok()},
        }
    }
    if manual_clock:
        paths["/v1/debug/clock"] = {
            "post": {
                "operationId": "debug_clock",
                "summary": "Advance the manual clock (tests only)",
                "requestBody": _body(schemas.CLOCK_REQUEST),
                "responses": _responses(schemas.CLOCK_RESPONSE, with_body=True, auth=False),
            }
        }
        paths["/v1/debug/store"] = {
            "post": {
                "operationId": "debug_store",
                "summary": "Inject store faults (tests only)",
                "requestBody": _body(schemas.STORE_FAULTS_REQUEST),
                "responses": _responses(schemas.STORE_FAULTS_RESPONSE, with_body=True, auth=False),
            }
        }
    for path, model in (("/healthz", schemas.STATUS_RESPONSE), ("/readyz", schemas.STATUS_RESPONSE)):
        paths[path] = {
            "get": {
                "operationId": path.strip("/"),
                "responses": {
                    "200": {"description": "ok", "content": {JSON: {"schema": _ref(model)}}},
                    "503": {"description": "not ready", "content": {JSON: {"schema": _ref(model)}}},
                },
                "security": [],
            }
        }
    paths["/metrics"] = {
        "get": {
            "operationId": "metrics",
            "responses": {
                "200": {"description": "Prometheus text", "content": {"text/plain": {"schema": {"type": "string"}}}}
            },
            "security": [],
        }
    }

    seen: dict[str, Model] = {}
    for model in (
        schemas.HTTP_ERROR,
        schemas.ERROR_ONLY,
        *(r for _, _, req, res, _ in post_routes for r in (req, res)),
        schemas.FETCH_RESPONSE,
        schemas.DESCRIBE_RESPONSE,
        schemas.LIST_RESPONSE,
        schemas.EXPECTED_MEMBERS_REQUEST,
        schemas.EXPECTED_MEMBERS_RESPONSE,
        schemas.CONFIG_RESPONSE,
        schemas.CLOCK_REQUEST,
        schemas.CLOCK_RESPONSE,
        schemas.STORE_FAULTS_REQUEST,
        schemas.STORE_FAULTS_RESPONSE,
        schemas.STATUS_RESPONSE,
    ):
        _models(model, seen)
    document: dict[str, Any] = {
        "openapi": "3.0.3",
        "info": {
            "title": "Berth coordinator",
            "version": "1",
            "description": "Kafka's classic group coordinator (KIP-345/394/814) over HTTP/JSON; see API.md.",
        },
        "paths": paths,
        "components": {"schemas": {name: _model_schema(model, limits) for name, model in seen.items()}},
    }
    if auth:
        document["components"]["securitySchemes"] = {"bearer": {"type": "http", "scheme": "bearer"}}
        document["security"] = [{"bearer": []}]
    return document


def _journal_ok() -> dict[str, Any]:
    event = {"type": "object", "required": ["seq", "ts_ms", "group_id", "type"], "additionalProperties": True}
    return {
        "description": "a page of events",
        "content": {
            JSON: {
                "schema": {
                    "type": "object",
                    "required": ["events", "next"],
                    "properties": {"events": {"type": "array", "items": event}, "next": {"type": "integer"}},
                }
            }
        },
    }
