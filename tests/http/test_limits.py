"""Slow and greedy clients are bounded with clear answers while everyone else keeps being served:
a connection that never finishes its request is closed after the idle timeout, a dripped body gets 408,
connections over the cap get 503 and are closed, and a flood of anonymous joins stops at the pending-id cap."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from support.coordinator import CoordinatorProcess
from support.rawhttp import post_json, send

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def limited(tmp_path_factory: pytest.TempPathFactory) -> Iterator[CoordinatorProcess]:
    proc = CoordinatorProcess(
        Path(tmp_path_factory.mktemp("limits")) / "data",
        "--idle-timeout-s",
        "1",
        "--body-timeout-s",
        "1",
        "--max-connections",
        "20",
        "--max-pending-members-per-group",
        "50",
    )
    proc.start()
    yield proc
    proc.kill()


def raw_socket(url: str) -> socket.socket:
    parts = urlsplit(url)
    sock = socket.create_connection((parts.hostname, parts.port), timeout=15)
    return sock


def read_all(sock: socket.socket) -> bytes:
    chunks = []
    while chunk := sock.recv(65536):
        chunks.append(chunk)
    return b"".join(chunks)


def others_are_served(url: str) -> bool:
    status, body = post_json(url, "/v1/groups/bystander/heartbeat", {"member_id": "m", "generation_id": 1})
    return status == 200 and body["error"] == "UNKNOWN_MEMBER_ID"


def test_a_connection_that_never_finishes_its_request_is_closed(limited: CoordinatorProcess) -> None:
    sock = raw_socket(limited.url)
    sock.sendall(b"POST /v1/groups/g/heartbeat HTTP/1.1\r\nHost: x\r\nContent-")  # and then nothing
    assert others_are_served(limited.url)
    assert read_all(sock) == b""  # closed by the coordinator (the socket timeout would raise instead)
    sock.close()


def test_a_dripped_body_gets_408_naming_the_body(limited: CoordinatorProcess) -> None:
    sock = raw_socket(limited.url)
    sock.sendall(
        b"POST /v1/groups/g/heartbeat HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        b'Content-Length: 100\r\n\r\n{"member_id":'
    )
    answer = read_all(sock).decode()
    sock.close()
    head, _, body = answer.partition("\r\n\r\n")
    assert head.startswith("HTTP/1.1 408")
    assert json.loads(body)["message"].startswith("body:")
    assert others_are_served(limited.url)


def test_connections_over_the_cap_get_503_and_are_closed(limited: CoordinatorProcess) -> None:
    hogs = [raw_socket(limited.url) for _ in range(20)]
    try:
        for hog in hogs:
            hog.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            assert hog.recv(4096).startswith(b"HTTP/1.1 200")  # served, then held open (keep-alive)
        status, body = send(limited.url, "GET", "/healthz")
        assert status == 503
        assert body["error"] == "TOO_MANY_CONNECTIONS"
    finally:
        for hog in hogs:
            hog.close()
    for _ in range(100):  # the closed hogs free their slots as the server notices them
        if send(limited.url, "GET", "/healthz")[0] == 200:
            break
    assert others_are_served(limited.url)


def test_a_flood_of_anonymous_joins_churns_its_own_pending_ids_and_newcomers_still_get_in(
    limited: CoordinatorProcess,
) -> None:
    """Beyond the pending cap a newcomer pushes out the oldest pending id instead of being refused (issue 22: a
    refusal locked the group's real newcomers out for as long as the flood's ids lived)."""
    join = {
        "member_id": "",
        "session_timeout_ms": 1_800_000,
        "protocol_type": "consumer",
        "protocols": [{"name": "r", "metadata": ""}],
    }
    ids = [post_json(limited.url, "/v1/groups/flooded/join", join)[1] for _ in range(80)]
    assert {answer["error"] for answer in ids} == {"MEMBER_ID_REQUIRED"}
    assert others_are_served(limited.url)
    pushed_out = dict(join, member_id=ids[0]["member_id"])
    assert post_json(limited.url, "/v1/groups/flooded/join", pushed_out)[1]["error"] == "UNKNOWN_MEMBER_ID"
    # A newcomer after the flood gets an id and is admitted with it: its join parks until the rebalance completes,
    # which waits for the flood's pending ids to go (at most the pending timeout, 30 s, on the manual clock).
    newcomer = post_json(limited.url, "/v1/groups/flooded/join", join)[1]
    rejoin = dict(join, member_id=newcomer["member_id"])
    with ThreadPoolExecutor(1) as pool:
        admitted = pool.submit(post_json, limited.url, "/v1/groups/flooded/join", rejoin)
        for _ in range(200):  # the join is parked once its member shows (pending ids are never listed)
            described = send(limited.url, "GET", "/v1/groups/flooded")[1]
            if [m["member_id"] for m in described["members"]] == [newcomer["member_id"]]:
                break
            time.sleep(0.05)
        else:
            raise AssertionError("the newcomer's join never parked")
        assert post_json(limited.url, "/v1/debug/clock", {"advance_ms": 30_000})[0] == 200
        status, answer = admitted.result(timeout=30)
    assert (status, answer["error"], answer["member_id"]) == (200, "NONE", newcomer["member_id"])
