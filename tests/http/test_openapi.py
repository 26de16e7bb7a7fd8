"""The OpenAPI document (``/v1/openapi.json``) is true to the code: schemathesis generates requests from it and
every answer of a live coordinator must be no 5xx, have a documented status and content type, and match the
documented response schema.

Join, sync and a journal read with ``wait_ms`` are long-polls: a generated join may legitimately wait for a
rebalance, a journal read for an event, so a client-side timeout on those counts as parked, not as a failure.
Time moves for real here (no manual clock) with no initial rebalance delay, so most joins are answered at once.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest
import requests
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis import GenerationMode
from schemathesis.checks import (
    content_type_conformance,
    not_a_server_error,
    response_schema_conformance,
    status_code_conformance,
)
from support.coordinator import CoordinatorProcess
from support.rawhttp import send

from berth.coordinator.protocol.openapi import openapi_document, render

pytestmark = pytest.mark.timeout(300)
LONG_POLLS = {"join", "sync", "journal"}


@pytest.fixture(scope="module")
def fuzzed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[CoordinatorProcess]:
    proc = CoordinatorProcess(
        Path(tmp_path_factory.mktemp("openapi")) / "data",
        "--group-initial-rebalance-delay-ms",
        "0",
        "--max-body-bytes",
        "65536",
        manual_clock=False,
    )
    proc.start()
    yield proc
    assert send(proc.url, "GET", "/healthz")[0] == 200  # still alive after everything it was sent
    proc.kill()


@pytest.fixture(scope="module")
def api_schema(fuzzed: CoordinatorProcess) -> schemathesis.BaseSchema:
    return schemathesis.openapi.from_url(f"{fuzzed.url}/v1/openapi.json")


def _operations(document_url_schema: schemathesis.BaseSchema) -> list[schemathesis.APIOperation]:
    return [result.ok() for result in document_url_schema.get_all_operations()]


def _cases() -> list[object]:
    """Every operation positively, and negatively where an invalid request can be sent at all (a body or a query
    parameter; a path parameter alone cannot be made invalid and still reach the route), from the declarations."""
    cases: list[object] = []
    for path in openapi_document()["paths"].values():
        for operation in path.values():
            name = operation["operationId"]
            cases.append(pytest.param(name, GenerationMode.POSITIVE, id=f"{name}-positive"))
            if "requestBody" in operation or any(p.get("in") == "query" for p in operation.get("parameters", ())):
                cases.append(pytest.param(name, GenerationMode.NEGATIVE, id=f"{name}-negative"))
    return cases


@pytest.mark.parametrize(("operation_id", "mode"), _cases())
def test_every_answer_matches_the_document(
    api_schema: schemathesis.BaseSchema, operation_id: str, mode: GenerationMode
) -> None:
    operation = next(op for op in _operations(api_schema) if op.definition.raw.get("operationId") == operation_id)
    checks = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance]

    @given(case=operation.as_strategy(generation_mode=mode))
    @settings(max_examples=20, deadline=None, suppress_health_check=list(HealthCheck), database=None)
    def check(case: schemathesis.Case) -> None:
        try:
            case.call_and_validate(checks=checks, timeout=3)
        except requests.exceptions.Timeout:
            if operation_id not in LONG_POLLS:
                raise

    check()


def test_the_document_describes_every_route(fuzzed: CoordinatorProcess) -> None:
    status, document = send(fuzzed.url, "GET", "/v1/openapi.json")
    assert status == 200
    operations = {op["operationId"] for path in document["paths"].values() for op in path.values()}
    assert operations == {
        "join", "sync", "heartbeat", "leave", "offsets", "offset_fetch", "describe", "delete",
        "expected_members_put", "expected_members_get", "expected_members_delete", "owner_put", "owner_delete", "list",
        "config", "journal", "healthz", "readyz", "metrics",
    }  # fmt: skip
    join_body = document["components"]["schemas"]["JoinRequest"]
    assert set(join_body["required"]) == {"member_id", "session_timeout_ms", "protocol_type", "protocols"}


def test_the_checked_in_document_is_the_one_the_code_generates() -> None:
    """docs/openapi.json is generated from the declarations; regenerate it with
    ``python -m berth.coordinator.protocol.openapi > docs/openapi.json`` when they change."""
    checked_in = (Path(__file__).resolve().parents[2] / "docs" / "openapi.json").read_text()
    assert checked_in == render(openapi_document()), "docs/openapi.json drifted from the code: regenerate it"


def test_a_schema_description_does_not_depend_on_how_msgspec_keeps_docstrings(monkeypatch: pytest.MonkeyPatch) -> None:
    """Regression (CI stop 37): msgspec 0.23 drops a docstring's indentation, earlier releases kept it, so the
    checked-in document differed from the one CI's fresh install generated. Whichever msgspec is installed, the
    document is the same when msgspec hands its descriptions over indented as 0.22 did: Berth cleans them."""
    generated = openapi_document()
    schema_components = msgspec.json.schema_components

    def as_msgspec_0_22_did(*args: Any, **kwargs: Any) -> Any:
        refs, schemas = schema_components(*args, **kwargs)
        for schema in schemas.values():
            if "\n" in schema.get("description", ""):
                schema["description"] = schema["description"].replace("\n", "\n    ")  # a class body's indentation
        return refs, schemas

    monkeypatch.setattr(msgspec.json, "schema_components", as_msgspec_0_22_did)
    described = openapi_document()
    indented = [name for name, s in described["components"]["schemas"].items() if "\n " in s.get("description", "")]
    assert indented == [], "a description keeps its docstring's indentation"
    assert described == generated


def test_the_served_document_is_the_checked_in_one_for_the_default_flags(fuzzed: CoordinatorProcess) -> None:
    status, served = send(fuzzed.url, "GET", "/v1/openapi.json")
    assert status == 200
    assert served == json.loads(render(openapi_document()))
