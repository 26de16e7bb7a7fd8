"""``berth-groups`` against a real coordinator: every subcommand in both output modes, and every error class.

One coordinator serves the module. It holds a stable static group ``orders`` (three members that stopped without
leaving, so on the manual clock they stay members) with committed offsets, a group ``leavers`` for the
remove-members runs, and empty groups to delete. Commands run in-process through ``main(argv)``, plus once as the
installed console script.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import aiohttp
import pytest
from member_harness import form_group, member_config
from support.api import Api
from support.coordinator import CoordinatorProcess
from support.net import free_port

from berth.coordinator.client import CoordinatorAdmin, GroupMember
from berth.coordinator.client.groups_cli import main

pytestmark = pytest.mark.timeout(60)

ORDERS = ["orders-0", "orders-1", "orders-2"]
LEAVERS = ["leavers-0", "leavers-1", "leavers-2", "leavers-3"]


async def populate(url: str) -> None:
    async with aiohttp.ClientSession() as session:
        api = Api(session, url)
        for group, instances, assignor in (("orders", ORDERS, "range"), ("leavers", LEAVERS, "sticky")):
            # Long sessions: they must outlive the clock advances that form the next group.
            members = [
                GroupMember(member_config(url, group, instance, session_timeout_ms=600_000, assignors=(assignor,)))
                for instance in instances
            ]
            await form_group(api, members)
            if group == "orders":
                await members[0].commit({("orders", 0): 100, ("orders", 5): 7})
            for member in members:
                await member.close()  # static: no leave, they stay in the group
    async with CoordinatorAdmin(url) as admin:
        for empty in ("empty-1", "empty-2"):
            await admin.put_expected_members(empty, [f"{empty}-0"])  # creates the group, Empty


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    process = CoordinatorProcess(tmp_path_factory.mktemp("cli") / "data").start()
    asyncio.run(populate(process.url))
    yield process.url
    process.kill()


@pytest.fixture(autouse=True)
def no_berth_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for variable in ("BERTH_COORDINATOR_URL", "BERTH_TOKEN", "BERTH_TOKEN_FILE", "BERTH_CA_FILE"):
        monkeypatch.delenv(variable, raising=False)


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


# ------------------------------------------------------------------------------------------------------ success


def test_list(url: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "--coordinator", url, "list")
    assert code == 0
    lines = out.splitlines()
    assert lines[0].split() == ["GROUP", "STATE", "PROTOCOL", "TYPE"]
    assert {tuple(line.split()[:2]) for line in lines[1:]} >= {("orders", "Stable"), ("empty-1", "Empty")}

    code, out, _ = run(capsys, "list", "--state", "Stable", "--coordinator", url, "--output", "json")
    assert code == 0
    groups = json.loads(out)["groups"]
    assert {g["group_id"] for g in groups} == {"orders", "leavers"}
    assert all(g["group_state"] == "Stable" and g["protocol_type"] == "consumer" for g in groups)


def test_describe(url: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "--coordinator", url, "describe", "orders")
    assert code == 0
    header, extras, columns, *rows = out.splitlines()
    assert header.split()[:6] == ["group", "orders", "state", "Stable", "generation", "1"]
    assert "protocol consumer/range" in header
    assert extras == "owner -  expected -"
    assert columns.split()[:2] == ["INSTANCE", "ID"]
    assert [row.split()[0] for row in rows] == ORDERS
    assert "(leader)" in rows[0] and "orders[0-2]" in rows[0]

    code, out, _ = run(capsys, "describe", "orders", "--coordinator", url, "-o", "json")
    assert code == 0
    described = json.loads(out)
    assert (described["group_state"], described["generation_id"], described["protocol"]) == ("Stable", 1, "range")
    assert [m["group_instance_id"] for m in described["members"]] == ORDERS
    assert described["members"][0]["assignment"] == {"orders": [0, 1, 2]}
    assert described["members"][0]["subscription"]["topics"] == ["orders"]


def test_remove_members(url: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "--coordinator", url, "remove-members", "leavers", "--instance-ids", "leavers-3")
    assert code == 0
    assert out.splitlines()[1].split()[0] == "leavers-3" and out.splitlines()[1].endswith("removed")

    code, out, _ = run(
        capsys, "--coordinator", url, "-o", "json", "remove-members", "leavers", "--instance-ids", "leavers-2"
    )
    assert code == 0
    assert [(m["group_instance_id"], m["error"]) for m in json.loads(out)["members"]] == [("leavers-2", "NONE")]
    code, out, _ = run(capsys, "--coordinator", url, "-o", "json", "describe", "leavers")
    assert [m["group_instance_id"] for m in json.loads(out)["members"]] == ["leavers-0", "leavers-1"]


def test_delete(url: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "--coordinator", url, "delete", "empty-1")
    assert (code, out.strip()) == (0, "deleted group empty-1")

    code, out, _ = run(capsys, "--coordinator", url, "delete", "empty-2", "--output", "json")
    assert code == 0
    assert json.loads(out) == {"group_id": "empty-2", "deleted": True, "error": "NONE"}


def test_offsets(url: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "--coordinator", url, "offsets", "orders")
    assert code == 0
    assert [line.split() for line in out.splitlines()] == [
        ["TOPIC", "PARTITION", "OFFSET", "METADATA"],
        ["orders", "0", "100", "-"],
        ["orders", "5", "7", "-"],
    ]

    code, out, _ = run(capsys, "--coordinator", url, "offsets", "orders", "--topic", "orders", "-o", "json")
    assert code == 0
    offsets = json.loads(out)["offsets"]
    assert [(o["topic"], o["partition"], o["offset"]) for o in offsets] == [("orders", 0, 100), ("orders", 5, 7)]


def test_coordinator_url_comes_from_the_environment(
    url: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BERTH_COORDINATOR_URL", url)
    code, out, _ = run(capsys, "describe", "orders", "-o", "json")
    assert code == 0 and json.loads(out)["group_id"] == "orders"


def test_installed_console_script(url: str) -> None:
    script = Path(sys.executable).with_name("berth-groups")
    done = subprocess.run(
        [str(script), "--coordinator", url, "--output", "json", "list"], capture_output=True, text=True, timeout=30
    )
    assert done.returncode == 0, done.stderr
    assert "orders" in {g["group_id"] for g in json.loads(done.stdout)["groups"]}


# ------------------------------------------------------------------------------------------------------- errors


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["describe", "nobody"], "group 'nobody' does not exist"),
        (["offsets", "nobody"], "group 'nobody' does not exist"),
        (["delete", "nobody"], "group 'nobody' does not exist (GROUP_ID_NOT_FOUND)"),
        (["delete", "orders"], "group 'orders' still has members (NON_EMPTY_GROUP)"),
    ],
)
@pytest.mark.parametrize("output", ["table", "json"])
def test_unknown_or_busy_group_fails_with_one_line(
    url: str, capsys: pytest.CaptureFixture[str], argv: list[str], message: str, output: str
) -> None:
    code, out, err = run(capsys, "--coordinator", url, "--output", output, *argv)
    assert code == 1 and out == ""
    assert err.startswith(f"berth-groups: error: {message}") and err.count("\n") == 1


@pytest.mark.parametrize("output", ["table", "json"])
def test_remove_members_reports_ids_that_were_not_members(
    url: str, capsys: pytest.CaptureFixture[str], output: str
) -> None:
    code, out, err = run(
        capsys, "--coordinator", url, "-o", output, "remove-members", "orders", "--instance-ids", "orders-9,orders-8"
    )
    assert code == 1
    assert err == "berth-groups: error: not members of group 'orders' (UNKNOWN_MEMBER_ID): orders-9, orders-8\n"
    assert "orders-9" in out  # the per-member results are still shown


def test_connection_refused_fails_with_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "--coordinator", f"http://127.0.0.1:{free_port()}", "list")
    assert code == 1 and out == ""
    assert err.startswith("berth-groups: error: coordinator at http://127.0.0.1:") and "unreachable" in err
    assert err.count("\n") == 1


@pytest.fixture(scope="module")
def secured_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    folder = tmp_path_factory.mktemp("cli-auth")
    tokens = folder / "tokens.json"
    tokens.write_text('{"tokens": [{"token": "orders-app-secret", "groups": ["orders"], "admin": false}]}')
    process = CoordinatorProcess(folder / "data", "--tokens-file", str(tokens)).start()
    yield process.url
    process.kill()


def test_missing_token_is_a_401_with_a_hint(secured_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "--coordinator", secured_url, "describe", "orders")
    assert code == 1 and out == ""
    assert err.startswith("berth-groups: error: HTTP 401 GROUP_AUTHORIZATION_FAILED")
    assert err.rstrip().endswith("(no token given: pass --token-file or set BERTH_TOKEN or BERTH_TOKEN_FILE)")
    assert err.count("\n") == 1


def test_token_without_the_right_is_a_403(
    secured_url: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    code, out, err = run(capsys, "--coordinator", secured_url, "--token", "orders-app-secret", "list")
    assert code == 1 and out == ""
    warning, error = err.splitlines()
    assert warning.startswith("berth-groups: warning: --token shows the token to every user of this machine (ps")
    assert error.startswith("berth-groups: error: HTTP 403 GROUP_AUTHORIZATION_FAILED from GET /v1/groups")
    assert error.endswith("(the coordinator said: Authorization: token 'tokens[0]' is not an admin token)")

    monkeypatch.setenv("BERTH_TOKEN", "orders-app-secret")  # the default token, allowed on its own group:
    code, _, err = run(capsys, "--coordinator", secured_url, "describe", "orders")
    assert (code, err) == (1, "berth-groups: error: group 'orders' does not exist\n")  # authorised, and empty


def test_the_token_comes_from_a_file_and_never_from_the_command_line(
    secured_url: str, capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    token_file = tmp_path / "token"
    token_file.write_text("orders-app-secret\n")
    code, _, err = run(capsys, "--coordinator", secured_url, "--token-file", str(token_file), "describe", "orders")
    assert (code, err) == (1, "berth-groups: error: group 'orders' does not exist\n")  # authorised, no warning
    monkeypatch.setenv("BERTH_TOKEN_FILE", str(token_file))
    code, _, err = run(capsys, "--coordinator", secured_url, "describe", "orders")
    assert (code, err) == (1, "berth-groups: error: group 'orders' does not exist\n")
    with pytest.raises(SystemExit) as usage:
        main(["--token", "x", "--token-file", str(token_file), "list"])
    assert usage.value.code == 2


# ------------------------------------------------------------------------------------------ untrusted output


HOSTILE_GROUP = "evil\x1b[2J\nberth-groups: all clear\u202e"
HOSTILE_CLIENT = "\x1b]0;pwned\x07client"


@pytest.fixture(scope="module")
def hostile(url: str) -> str:
    """A group whose id and member's client id carry terminal escapes, a newline and a bidi override."""

    async def create() -> None:
        async with aiohttp.ClientSession() as session:
            api = Api(session, url)
            await api.request(
                "PUT", api.group_path(HOSTILE_GROUP, "/expected-members"), {"group_instance_ids": ["h-0"]}
            )
            joined = await api.join(HOSTILE_GROUP, instance_id="h-0", client_id=HOSTILE_CLIENT)
            assert joined["error"] == "NONE", joined

    asyncio.run(create())
    return url


@pytest.mark.parametrize("argv", [["list"], ["describe", HOSTILE_GROUP]], ids=["list", "describe"])
def test_what_the_coordinator_sent_is_escaped_in_tables(
    hostile: str, capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    code, out, _ = run(capsys, "--coordinator", hostile, *argv)
    assert code == 0
    assert "\x1b" not in out and "\u202e" not in out and "\x07" not in out
    assert "\nberth-groups: all clear" not in out  # no forged line
    assert "evil\\x1b[2J\\x0aberth-groups: all clear\\u202e" in out
    if argv[0] == "describe":
        assert "\\x1b]0;pwned\\x07client" in out


def test_json_output_stays_json_with_every_character_escaped(hostile: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "--coordinator", hostile, "-o", "json", "describe", HOSTILE_GROUP)
    assert code == 0 and "\x1b" not in out and "\u202e" not in out
    described = json.loads(out)
    assert described["group_id"] == HOSTILE_GROUP and described["members"][0]["client_id"] == HOSTILE_CLIENT


# ------------------------------------------------------------------------------------------------ CLI habits


def test_version_and_a_capped_answer(url: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as version:
        main(["--version"])
    assert version.value.code == 0 and capsys.readouterr().out.startswith("berth-groups ")
    code, out, err = run(capsys, "--coordinator", url, "--max-response-bytes", "100", "list")
    assert code == 1 and out == ""
    assert "over the client's 100-byte cap (max_response_bytes)" in err


def test_a_closed_pipe_ends_the_command_quietly(url: str) -> None:
    script = Path(sys.executable).with_name("berth-groups")
    process = subprocess.Popen(
        [str(script), "--coordinator", url, "list"], stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    assert process.stdout is not None and process.stderr is not None
    process.stdout.close()  # the reader is gone before the first line is written (| head -0)
    err = process.stderr.read().decode()
    assert process.wait(30) == 141
    assert err == ""
