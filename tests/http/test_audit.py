"""Token scopes, names and the audit trail (issue 12, items 16 and 17; docs/api.md §10 "Tokens", "Audit"):

- a ``journal:read`` token reads the journal and nothing an admin token could besides;
- every admin action's journal events name the token that acted (``actor``); an unnamed token is ``tokens[i]``;
- refused credentials are logged, rate-limited, naming the client and the path, never the token or any part of it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.coordinator import CoordinatorProcess
from support.rawhttp import send

pytestmark = pytest.mark.timeout(120)

OPERATOR = "operator-token-0123456789"
ANALYTICS = "analytics-token-abcdefghij"
ORDERS = "orders-team-token-klmnopqr"
UNNAMED_ADMIN = "unnamed-admin-token-stuvwxyz"
TOKENS = {
    "tokens": [
        {"name": "operator", "token": OPERATOR, "admin": True},
        {"name": "analytics", "token": ANALYTICS, "scopes": ["journal:read"]},
        {"name": "orders", "token": ORDERS, "groups": ["orders*"]},
        {"token": UNNAMED_ADMIN, "admin": True},
    ]
}
JOIN = {
    "member_id": "",
    "group_instance_id": "orders-0",
    "session_timeout_ms": 30_000,
    "protocol_type": "consumer",
    "protocols": [{"name": "range", "metadata": ""}],
}


@pytest.fixture(scope="module")
def audited(tmp_path_factory: pytest.TempPathFactory) -> Iterator[CoordinatorProcess]:
    root = Path(tmp_path_factory.mktemp("audit"))
    tokens = root / "tokens.json"
    tokens.write_text(json.dumps(TOKENS))
    proc = CoordinatorProcess(root / "data", "--tokens-file", str(tokens), "--group-initial-rebalance-delay-ms", "0")
    proc.start()
    yield proc
    proc.kill()


def call(proc: CoordinatorProcess, method: str, path: str, token: str | None, body: Any = None) -> tuple[int, Any]:
    headers = {"Content-Type": "application/json"} if body is not None else {}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    return send(proc.url, method, path, None if body is None else json.dumps(body).encode(), headers)


def journal(proc: CoordinatorProcess, after: int = 0) -> list[dict[str, Any]]:
    status, page = call(proc, "GET", f"/v1/journal?after={after}", OPERATOR)
    assert status == 200
    events: list[dict[str, Any]] = page["events"]
    return events


def test_the_journal_scope_reads_the_journal_and_nothing_else(audited: CoordinatorProcess) -> None:
    assert call(audited, "GET", "/v1/journal", ANALYTICS)[0] == 200
    assert call(audited, "GET", "/v1/config", ANALYTICS)[0] == 200  # any valid token
    for method, path, body in [
        ("GET", "/v1/groups", None),
        ("GET", "/v1/groups/orders", None),
        ("DELETE", "/v1/groups/orders", None),
        ("PUT", "/v1/groups/orders/expected-members", {"group_instance_ids": ["orders-0"]}),
        ("POST", "/v1/groups/orders/heartbeat", {"member_id": "m", "generation_id": 1}),
    ]:
        status, answer = call(audited, method, path, ANALYTICS, body)
        assert status == 403, (method, path)
        assert "'analytics'" in answer["message"]  # named, so the operator of the coordinator knows which one
    status, answer = call(audited, "GET", "/v1/journal", ORDERS)
    assert status == 403
    assert answer["message"] == (
        "Authorization: token 'orders' may not read the journal (needs admin or the journal:read scope)"
    )


def test_admin_actions_name_the_token_that_acted_in_the_journal(audited: CoordinatorProcess) -> None:
    start = journal(audited)[-1]["seq"] if journal(audited) else 0
    members = {"group_instance_ids": ["orders-0"]}  # the join completes as soon as orders-0 is in
    assert call(audited, "PUT", "/v1/groups/orders/expected-members", OPERATOR, members)[0] == 200
    status, joined = call(audited, "POST", "/v1/groups/orders/join", ORDERS, JOIN)
    assert status == 200 and joined["error"] == "NONE"
    removal = {"api_version": 5, "members": [{"member_id": "", "group_instance_id": "orders-0"}]}
    assert call(audited, "POST", "/v1/groups/orders/leave", UNNAMED_ADMIN, removal)[1]["error"] == "NONE"
    assert call(audited, "DELETE", "/v1/groups/orders/expected-members", OPERATOR)[0] == 200
    assert call(audited, "DELETE", "/v1/groups/orders", OPERATOR)[1]["error"] == "NONE"
    events = journal(audited, start)
    acted = [(e["type"], e.get("actor")) for e in events]
    assert ("expected_members_changed", "operator") in acted
    assert ("member_left", "tokens[3]") in acted  # the unnamed admin token, called after its place in the file
    assert ("group_deleted", "operator") in acted
    assert acted.count(("expected_members_changed", "operator")) == 2
    # A member's own requests are not admin actions: its join carries no actor.
    assert all(e.get("actor") is None for e in events if e["type"] == "member_joined")


def test_refused_credentials_are_logged_quietly_and_never_show_a_token(tmp_path: Path) -> None:
    tokens = tmp_path / "tokens.json"
    tokens.write_text(json.dumps(TOKENS))
    guesses = [f"guess-{i:04d}-{ORDERS}" for i in range(40)]
    with CoordinatorProcess(tmp_path / "data", "--tokens-file", str(tokens)) as proc:
        for guess in guesses:
            assert call(proc, "GET", "/v1/journal", guess)[0] == 401
        assert call(proc, "GET", "/v1/groups", ORDERS)[0] == 403
        metrics = call(proc, "GET", "/metrics", None)[1]
        log = proc.stderr()
    refused = [line for line in log.splitlines() if "auth: refused" in line]
    assert len(refused) == 1, log  # the rest of the burst is counted, not written
    assert "unknown token from 127.0.0.1 on GET /v1/journal" in refused[0]
    assert 'berth_auth_failures_total{reason="unknown"} 40' in metrics
    assert 'berth_auth_failures_total{reason="forbidden"} 1' in metrics
    for secret in [*guesses, OPERATOR, ANALYTICS, ORDERS, UNNAMED_ADMIN]:
        assert secret[:8] not in log and secret[-8:] not in log
