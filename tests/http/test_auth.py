"""Bearer tokens scoped to groups, admin-only routes, and tokens that never leak (docs/api.md §10 "Tokens")."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.coordinator import CoordinatorProcess, secured_coordinator
from support.rawhttp import send

pytestmark = pytest.mark.timeout(120)

ADMIN = "admin-token-0123456789"
TEAM = "orders-team-token-abcdef"
BILLING = "billing-token-fedcba98"
TOKENS = {
    "tokens": [
        {"token": ADMIN, "groups": [], "admin": True},
        {"token": TEAM, "groups": ["orders-*"], "admin": False},
        {"token": BILLING, "groups": ["billing"]},
    ]
}
HEARTBEAT = json.dumps({"member_id": "m", "generation_id": 1}).encode()


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[CoordinatorProcess]:
    with secured_coordinator(tmp_path_factory.mktemp("auth"), tokens=TOKENS["tokens"]) as proc:
        yield proc


def call(
    proc: CoordinatorProcess, method: str, path: str, token: str | None, body: bytes | None = None
) -> tuple[int, Any]:
    headers = {"Content-Type": "application/json"} if body else {}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    return send(proc.url, method, path, body, headers)


@pytest.mark.parametrize("path", ["/healthz", "/readyz", "/metrics"])
def test_health_and_metrics_stay_open(secured: CoordinatorProcess, path: str) -> None:
    assert call(secured, "GET", path, None)[0] == 200


@pytest.mark.parametrize(
    ("authorization", "case"),
    [
        (None, "no header"),
        ("Bearer not-a-token", "unknown token"),
        (f"Basic {ADMIN}", "wrong scheme"),
        ("Bearer ", "empty"),
    ],
)
def test_missing_or_unknown_token_is_401(secured: CoordinatorProcess, authorization: str | None, case: str) -> None:
    headers = {"Content-Type": "application/json"}
    if authorization is not None:
        headers["Authorization"] = authorization
    status, body = send(secured.url, "POST", "/v1/groups/orders-1/heartbeat", HEARTBEAT, headers)
    assert status == 401, case
    assert body["error_code"] == 30
    assert body["error"] == "GROUP_AUTHORIZATION_FAILED"
    assert "Authorization" in body["message"]


def test_group_token_is_scoped_by_glob(secured: CoordinatorProcess) -> None:
    allowed = call(secured, "POST", "/v1/groups/orders-eu/heartbeat", TEAM, HEARTBEAT)
    assert allowed[0] == 200
    assert allowed[1]["error"] == "UNKNOWN_MEMBER_ID"  # through to the protocol
    status, body = call(secured, "POST", "/v1/groups/billing/heartbeat", TEAM, HEARTBEAT)
    assert status == 403
    assert body["error_code"] == 30
    assert call(secured, "POST", "/v1/groups/billing/heartbeat", BILLING, HEARTBEAT)[0] == 200
    assert call(secured, "POST", "/v1/groups/billing-2/heartbeat", BILLING, HEARTBEAT)[0] == 403


def test_star_in_a_glob_matches_a_slash(secured: CoordinatorProcess) -> None:
    assert call(secured, "POST", "/v1/groups/orders-eu%2Fwest/heartbeat", TEAM, HEARTBEAT)[0] == 200


ADMIN_ROUTES = [
    ("GET", "/v1/groups", None),
    ("DELETE", "/v1/groups/orders-1", None),
    ("GET", "/v1/journal", None),
    ("PUT", "/v1/groups/orders-1/expected-members", b'{"group_instance_ids": ["orders-1-0"]}'),
    ("GET", "/v1/groups/orders-1/expected-members", None),
    ("DELETE", "/v1/groups/orders-1/expected-members", None),
]


@pytest.mark.parametrize(("method", "path", "body"), ADMIN_ROUTES, ids=[f"{m} {p}" for m, p, _ in ADMIN_ROUTES])
def test_admin_routes_need_an_admin_token(
    secured: CoordinatorProcess, method: str, path: str, body: bytes | None
) -> None:
    journal_before = call(secured, "GET", "/v1/journal", ADMIN)[1]["next"]
    status, response = call(secured, method, path, TEAM, body)
    assert status == 403
    assert "admin" in response["message"]
    assert call(secured, "GET", "/v1/journal", ADMIN)[1]["next"] == journal_before  # nothing happened
    assert call(secured, method, path, ADMIN, body)[0] == 200


def test_config_needs_any_valid_token(secured: CoordinatorProcess) -> None:
    assert call(secured, "GET", "/v1/config", None)[0] == 401
    status, body = call(secured, "GET", "/v1/config", BILLING)
    assert status == 200
    assert body["api_versions"]["join"] == [0, 9]


def test_debug_clock_needs_no_token(secured: CoordinatorProcess) -> None:
    assert call(secured, "POST", "/v1/debug/clock", None, b'{"advance_ms": 0}')[0] == 200


def test_tokens_never_appear_in_logs_metrics_or_journal(secured: CoordinatorProcess) -> None:
    call(secured, "POST", "/v1/groups/billing/heartbeat", TEAM, HEARTBEAT)  # a denial worth logging
    call(secured, "POST", "/v1/groups/orders-x/join", TEAM, b"{not json")
    metrics = call(secured, "GET", "/metrics", None)[1]
    journal = json.dumps(call(secured, "GET", "/v1/journal", ADMIN)[1])
    for token in (ADMIN, TEAM, BILLING):
        assert token not in secured.stderr()
        assert token not in metrics
        assert token not in journal


@pytest.mark.parametrize(
    ("document", "complaint"),
    [
        ("tokens: {}", "tokens"),
        ("tokens: [{token: short}]", "tokens[0].token"),
        ("tokens: [{token: long-enough-token, admin: 'yes'}]", "tokens[0].admin"),
        ("tokens: [{token: long-enough-token, groups: orders}]", "tokens[0].groups"),
        ("tokens: [ {token: long-enough-token}, {token: long-enough-token} ]", "twice"),
        ("tokens: [", "not valid"),
        ("tokens: [{token: long-enough-token, scopes: ['journal:write']}]", "tokens[0].scopes"),
        ("tokens: [{token: long-enough-token, name: 'two words'}]", "tokens[0].name"),
        ("tokens: [{token: long-enough-1, name: ops}, {token: long-enough-2, name: ops}]", "'ops'"),
    ],
)
def test_a_bad_tokens_file_is_refused_at_start(tmp_path: Path, document: str, complaint: str) -> None:
    tokens = tmp_path / "tokens.yaml"
    tokens.write_text(document)
    proc = CoordinatorProcess(tmp_path / "data", "--tokens-file", str(tokens))
    with pytest.raises(RuntimeError, match="exit 2"):
        proc.start()
    lines = proc.stderr().strip().splitlines()
    assert len(lines) == 1
    assert complaint in lines[0]
