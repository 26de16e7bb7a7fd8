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
from support.coordinator import CoordinatorProcess, secured_coordinator
from support.net import free_port

from berth.coordinator.client import CoordinatorAdmin, GroupMember
from berth.coordinator.client.errors import (
    AuthorizationError,
    ConfigError,
    CoordinatorServerError,
    CoordinatorUnavailableError,
    GroupError,
    GroupOwnedError,
    RequestTooLargeError,
    ResponseTooLargeError,
)
from berth.coordinator.groups.groups_cli import main
from berth.coordinator.groups.groups_exit import ExitCode, exit_code_of
from berth.coordinator.protocol import Error

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
    ("argv", "message", "status"),
    [
        (["describe", "nobody"], "group 'nobody' does not exist", 3),
        (["offsets", "nobody"], "group 'nobody' does not exist", 3),
        (["delete", "nobody"], "group 'nobody' does not exist (GROUP_ID_NOT_FOUND)", 3),
        (["delete", "orders"], "group 'orders' still has members (NON_EMPTY_GROUP)", 4),
        (["remove-members", "nobody", "--all"], "group 'nobody' does not exist", 3),
    ],
)
@pytest.mark.parametrize("output", ["table", "json"])
def test_unknown_or_busy_group_fails_with_one_line_and_the_status_of_its_class(
    url: str, capsys: pytest.CaptureFixture[str], argv: list[str], message: str, status: int, output: str
) -> None:
    code, out, err = run(capsys, "--coordinator", url, "--output", output, *argv)
    assert code == status and out == ""
    assert err.startswith(f"berth-groups: error: {message}") and err.count("\n") == 1


@pytest.mark.parametrize("output", ["table", "json"])
def test_remove_members_reports_ids_that_were_not_members(
    url: str, capsys: pytest.CaptureFixture[str], output: str
) -> None:
    code, out, err = run(
        capsys, "--coordinator", url, "-o", output, "remove-members", "orders", "--instance-ids", "orders-9,orders-8"
    )
    assert code == 3  # not found
    assert err == "berth-groups: error: not members of group 'orders' (UNKNOWN_MEMBER_ID): orders-9, orders-8\n"
    assert "orders-9" in out  # the per-member results are still shown


def test_connection_refused_fails_with_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "--coordinator", f"http://127.0.0.1:{free_port()}", "list")
    assert code == 6 and out == ""  # unavailable
    assert err.startswith("berth-groups: error: coordinator at http://127.0.0.1:") and "unreachable" in err
    assert err.count("\n") == 1


@pytest.fixture(scope="module")
def secured_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    tokens = [
        {"token": "orders-app-secret", "groups": ["orders"], "admin": False},
        {"token": "the-admin-secret", "admin": True},
    ]
    with secured_coordinator(tmp_path_factory.mktemp("cli-auth"), tokens=tokens) as process:
        yield process.url


def test_missing_token_is_a_401_with_a_hint(secured_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "--coordinator", secured_url, "describe", "orders")
    assert code == 5 and out == ""  # not allowed
    assert err.startswith("berth-groups: error: HTTP 401 GROUP_AUTHORIZATION_FAILED")
    assert err.rstrip().endswith("(no token given: pass --token-file or set BERTH_TOKEN or BERTH_TOKEN_FILE)")
    assert err.count("\n") == 1


def test_token_without_the_right_is_a_403(
    secured_url: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    code, out, err = run(capsys, "--coordinator", secured_url, "--token", "orders-app-secret", "list")
    assert code == 5 and out == ""
    warning, error = err.splitlines()
    assert warning.startswith("berth-groups: warning: --token shows the token to every user of this machine (ps")
    assert error.startswith("berth-groups: error: HTTP 403 GROUP_AUTHORIZATION_FAILED from GET /v1/groups")
    assert error.endswith("(the coordinator said: Authorization: token 'tokens[0]' is not an admin token)")

    monkeypatch.setenv("BERTH_TOKEN", "orders-app-secret")  # the default token, allowed on its own group:
    code, _, err = run(capsys, "--coordinator", secured_url, "describe", "orders")
    assert (code, err) == (3, "berth-groups: error: group 'orders' does not exist\n")  # authorised, and empty


def test_the_token_comes_from_a_file_and_never_from_the_command_line(
    secured_url: str, capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    token_file = tmp_path / "token"
    token_file.write_text("orders-app-secret\n")
    code, _, err = run(capsys, "--coordinator", secured_url, "--token-file", str(token_file), "describe", "orders")
    assert (code, err) == (3, "berth-groups: error: group 'orders' does not exist\n")  # authorised, no warning
    monkeypatch.setenv("BERTH_TOKEN_FILE", str(token_file))
    code, _, err = run(capsys, "--coordinator", secured_url, "describe", "orders")
    assert (code, err) == (3, "berth-groups: error: group 'orders' does not exist\n")
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


@pytest.mark.parametrize(
    "argv",
    [
        ["list"],
        ["describe", HOSTILE_GROUP],
        ["describe", HOSTILE_GROUP, "--members", "--verbose"],
        ["describe", "--all-groups", "--state"],
        ["describe", HOSTILE_GROUP, "--offsets"],
    ],
    ids=["list", "describe", "members", "state", "offsets"],
)
def test_what_the_coordinator_sent_is_escaped_in_tables(
    hostile: str, capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    code, out, _ = run(capsys, "--coordinator", hostile, *argv)
    assert code == 0
    assert "\x1b" not in out and "\u202e" not in out and "\x07" not in out
    assert "\nberth-groups: all clear" not in out  # no forged line
    assert "evil\\x1b[2J\\x0aberth-groups: all clear\\u202e" in out
    if argv[:2] == ["describe", HOSTILE_GROUP] and "--offsets" not in argv:
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
    assert code == 6 and out == ""  # nothing usable came back
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


# ------------------------------------------------------------------------- kafka-consumer-groups.sh's habits
#
# Groups of their own, so that these tests do not depend on the ones above (which remove members and delete):
# ``fleet`` (three expected, two joined, an owner), ``mixed`` (a static and a dynamic member), ``foreign`` (an
# assignment that is not the member library's encoding) and, per reset test, an Empty group that real members
# formed, committed to and left.


async def form(
    url: str, group: str, instances: list[str | None], *, topics: dict[str, int] | None = None
) -> list[GroupMember]:
    """Members of the member library that formed ``group`` (on the manual clock) and are still running."""
    async with aiohttp.ClientSession() as session:
        api = Api(session, url)
        members = [
            GroupMember(
                member_config(
                    url,
                    group,
                    instance,
                    session_timeout_ms=600_000,
                    topics=topics or {"orders": 8},
                    assignors=("range",),
                )
            )
            for instance in instances
        ]
        await form_group(api, members)
    return members


async def formed_then_left(url: str, group: str, offsets: dict[tuple[str, int], int]) -> None:
    """An Empty group with ``offsets``, as a fleet that consumed and then stopped leaves it."""
    members = await form(url, group, [f"{group}-0", f"{group}-1"], topics={"events": 4, "audit": 2})
    await members[0].commit(offsets)
    for member in members:
        await member.close(leave=True)
    async with CoordinatorAdmin(url) as admin:
        assert (await admin.describe_group(group)).state == "Empty"


def committed(url: str, group: str) -> dict[tuple[str, int], int]:
    async def fetch() -> dict[tuple[str, int], int]:
        async with CoordinatorAdmin(url) as admin:
            return {tp: c.offset for tp, c in (await admin.fetch_offsets(group)).items()}

    return asyncio.run(fetch())


@pytest.fixture(scope="module")
def fleet(url: str) -> str:
    """``fleet``: owned by shop/fleet, expects fleet-0..2, of which fleet-0 and fleet-1 joined (range, 8 parts)."""

    async def create() -> None:
        async with CoordinatorAdmin(url) as admin:
            await admin.put_expected_members("fleet", ["fleet-0", "fleet-1", "fleet-2"])
        async with aiohttp.ClientSession() as session:
            status, answer = await Api(session, url).request(
                "PUT", "/v1/groups/fleet/owner", {"namespace": "shop", "name": "fleet", "uid": "uid-fleet"}
            )
            assert status == 200, answer
        members = await form(url, "fleet", ["fleet-0", "fleet-1"])
        await members[0].commit({("orders", 0): 40, ("orders", 7): 70})
        for member in members:
            await member.close()  # static: no leave

    asyncio.run(create())
    return "fleet"


def test_describe_shows_the_expected_members_not_yet_joined_and_the_owner(
    url: str, fleet: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(capsys, "--coordinator", url, "describe", fleet)
    assert code == 0
    assert out.splitlines()[1] == "owner shop/fleet  expected fleet-0,fleet-1,fleet-2  not joined fleet-2"

    code, out, _ = run(capsys, "--coordinator", url, "describe", fleet, "--state")
    assert code == 0
    assert [line.split() for line in out.splitlines()] == [
        ["GROUP", "STATE", "GENERATION", "ASSIGNMENT-STRATEGY", "#MEMBERS", "#EXPECTED", "NOT-JOINED", "OWNER"],
        ["fleet", "Stable", "1", "range", "2", "3", "fleet-2", "shop/fleet"],
    ]

    code, out, _ = run(capsys, "--coordinator", url, "-o", "json", "describe", fleet)
    described = json.loads(out)
    assert described["owner"] == {"namespace": "shop", "name": "fleet", "uid": "uid-fleet"}
    assert described["expected_members"] == ["fleet-0", "fleet-1", "fleet-2"]
    assert described["expected_not_joined"] == ["fleet-2"]


def test_members_with_their_partitions_after_a_real_member_library_group_formed(
    url: str, fleet: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(capsys, "--coordinator", url, "describe", fleet, "--members")
    assert code == 0
    header, *rows = [line.split() for line in out.splitlines()]
    assert header == ["GROUP", "CONSUMER-ID", "GROUP-INSTANCE-ID", "HOST", "CLIENT-ID", "#PARTITIONS"]
    assert [(row[0], row[2], row[5]) for row in rows] == [("fleet", "fleet-0", "4"), ("fleet", "fleet-1", "4")]
    assert all(row[1].startswith(f"{row[2]}-") for row in rows)  # the member ids the coordinator gave

    code, out, _ = run(capsys, "--coordinator", url, "describe", fleet, "--members", "--verbose")
    assert code == 0
    assert [line.split()[-1] for line in out.splitlines()] == ["ASSIGNMENT", "orders[0-3]", "orders[4-7]"]


def test_members_whose_assignment_is_not_the_berth_encoding_show_its_size(
    url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    async def create() -> None:
        async with aiohttp.ClientSession() as session:
            api = Api(session, url)
            await api.request("PUT", api.group_path("foreign", "/expected-members"), {"group_instance_ids": ["f-0"]})
            joined = await api.join("foreign", instance_id="f-0")
            synced = await api.sync(
                "foreign", joined["member_id"], joined["generation_id"], "f-0", {joined["member_id"]: b"\x00\x01\x02"}
            )
            assert synced["error"] == "NONE", synced

    asyncio.run(create())
    code, out, _ = run(capsys, "--coordinator", url, "describe", "foreign", "--members", "--verbose")
    assert code == 0
    row = out.splitlines()[1]
    assert row.split()[2] == "f-0" and row.split()[5] == "?"
    assert row.endswith("<3 bytes, not the Berth encoding>")


def test_offsets_view_shows_each_partition_committed_or_assigned_and_who_holds_it(
    url: str, fleet: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(capsys, "--coordinator", url, "describe", fleet, "--offsets")
    assert code == 0
    header, *rows = [line.split() for line in out.splitlines()]
    assert header[:5] == ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "CONSUMER-ID"]
    assert "LAG" not in header  # the coordinator does not know the logs' ends
    assert [(row[2], row[3], row[5]) for row in rows] == [
        ("0", "40", "fleet-0"),
        ("1", "-", "fleet-0"),
        ("2", "-", "fleet-0"),
        ("3", "-", "fleet-0"),
        ("4", "-", "fleet-1"),
        ("5", "-", "fleet-1"),
        ("6", "-", "fleet-1"),
        ("7", "70", "fleet-1"),
    ]


def test_describe_all_groups_with_two_groups(url: str, fleet: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "--coordinator", url, "describe", "--all-groups", "--state")
    assert code == 0
    rows = {line.split()[0]: line.split() for line in out.splitlines()[1:]}
    assert rows["orders"][1:5] == ["Stable", "1", "range", "3"]
    assert rows["fleet"][1:5] == ["Stable", "1", "range", "2"]

    code, out, _ = run(capsys, "--coordinator", url, "describe", "--all-groups", "-o", "json")
    assert code == 0
    groups = {g["group_id"]: g for g in json.loads(out)["groups"]}
    assert {"orders", "fleet"} <= set(groups)
    assert [m["group_instance_id"] for m in groups["orders"]["members"]] == ORDERS
    assert [(o["partition"], o["offset"]) for o in groups["orders"]["offsets"]] == [(0, 100), (5, 7)]

    code, out, _ = run(capsys, "--coordinator", url, "describe", "orders", "--group", fleet, "--members")
    assert code == 0  # the groups in the order named, each group's members in instance id order
    assert [line.split()[0] for line in out.splitlines()[1:]] == ["orders", "orders", "orders", "fleet", "fleet"]


def test_describe_of_several_groups_shows_those_that_exist_and_fails_for_the_others(
    url: str, fleet: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(capsys, "--coordinator", url, "describe", fleet, "nobody", "--state")
    assert code == 3
    assert [line.split()[0] for line in out.splitlines()] == ["GROUP", "fleet"]
    assert err == "berth-groups: error: group 'nobody' does not exist\n"


@pytest.mark.parametrize(
    "argv",
    [
        ["describe"],
        ["describe", "orders", "--all-groups"],
        ["describe", "orders", "--state", "--members"],
        ["remove-members", "orders"],
        ["remove-members", "orders", "--all", "--instance-id", "orders-0"],
        ["reset-offsets", "orders", "--all-topics"],
        ["reset-offsets", "orders", "--to-earliest"],
        ["reset-offsets", "orders", "--all-topics", "--to-earliest", "--to-offset", "3"],
        ["reset-offsets", "orders", "--all-topics", "--to-offset", "-3"],
        ["reset-offsets", "orders", "--all-topics", "--to-earliest", "--dry-run", "--execute"],
    ],
)
def test_usage_errors_exit_2(url: str, capsys: pytest.CaptureFixture[str], argv: list[str]) -> None:
    with pytest.raises(SystemExit) as usage:
        main(["--coordinator", url, *argv])
    assert usage.value.code == 2
    assert "berth-groups" in capsys.readouterr().err


# ------------------------------------------------------------------------------------------------ reset-offsets


def test_reset_is_refused_on_a_stable_group_naming_its_state_and_members(
    url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    before = committed(url, "orders")
    code, out, err = run(
        capsys, "--coordinator", url, "reset-offsets", "orders", "--all-topics", "--to-earliest", "--execute"
    )
    assert (code, out) == (4, "")  # refused by the group's state
    assert err.startswith(
        "berth-groups: error: group 'orders' is Stable with 3 members (orders-0, orders-1, orders-2): "
        "offsets can only be reset while the group is Empty"
    )
    assert committed(url, "orders") == before


def test_a_dry_run_shows_the_plan_and_changes_nothing(url: str, capsys: pytest.CaptureFixture[str]) -> None:
    asyncio.run(formed_then_left(url, "dry", {("events", 0): 100, ("events", 1): 30, ("audit", 0): 9}))
    for mode in ([], ["--dry-run"]):
        code, out, err = run(
            capsys, "--coordinator", url, "reset-offsets", "dry", "--topic", "events", "--to-offset", "5", *mode
        )
        assert code == 0
        assert [line.split() for line in out.splitlines()] == [
            ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "NEW-OFFSET"],
            ["dry", "events", "0", "100", "5"],
            ["dry", "events", "1", "30", "5"],
        ]
        assert err == "berth-groups: dry run, nothing changed: add --execute to commit these offsets\n"
    code, out, _ = run(
        capsys, "--coordinator", url, "-o", "json", "reset-offsets", "dry", "--all-topics", "--to-earliest"
    )
    assert code == 0
    assert json.loads(out) == {
        "group_id": "dry",
        "executed": False,
        "offsets": [
            {"topic": "audit", "partition": 0, "current_offset": 9, "new_offset": 0, "error": None},
            {"topic": "events", "partition": 0, "current_offset": 100, "new_offset": 0, "error": None},
            {"topic": "events", "partition": 1, "current_offset": 30, "new_offset": 0, "error": None},
        ],
    }
    assert committed(url, "dry") == {("events", 0): 100, ("events", 1): 30, ("audit", 0): 9}


def test_execute_commits_the_new_offsets_and_the_member_library_sees_them(
    url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    asyncio.run(formed_then_left(url, "replay", {("events", 0): 100, ("events", 1): 30, ("audit", 1): 9}))
    code, out, err = run(
        capsys,
        "--coordinator",
        url,
        "reset-offsets",
        "replay",
        "--topic",
        "events:0,2-3",
        "--to-offset",
        "7",
        "--execute",
    )
    assert (code, err) == (0, "")
    assert [line.split()[2:] for line in out.splitlines()] == [
        ["PARTITION", "CURRENT-OFFSET", "NEW-OFFSET"],
        ["0", "100", "7"],
        ["2", "-", "7"],
        ["3", "-", "7"],
    ]

    async def seen_by_a_member() -> dict[tuple[str, int], int]:
        (member,) = await form(url, "replay", ["replay-0"], topics={"events": 4, "audit": 2})
        try:
            return {tp: c.offset for tp, c in (await member.committed()).items()}
        finally:
            await member.close(leave=True)

    assert asyncio.run(seen_by_a_member()) == {
        ("events", 0): 7,
        ("events", 1): 30,
        ("events", 2): 7,
        ("events", 3): 7,
        ("audit", 1): 9,
    }


def test_shift_by_clamps_at_zero_as_kafka_clamps_to_the_log_start(url: str, capsys: pytest.CaptureFixture[str]) -> None:
    asyncio.run(formed_then_left(url, "shift", {("events", 0): 100, ("events", 1): 30}))
    code, out, _ = run(
        capsys,
        "--coordinator",
        url,
        "-o",
        "json",
        "reset-offsets",
        "shift",
        "--all-topics",
        "--shift-by",
        "-50",
        "--execute",
    )
    assert code == 0
    executed = json.loads(out)
    assert executed["executed"] is True
    assert [(o["partition"], o["current_offset"], o["new_offset"], o["error"]) for o in executed["offsets"]] == [
        (0, 100, 50, "NONE"),
        (1, 30, 0, "NONE"),
    ]
    assert committed(url, "shift") == {("events", 0): 50, ("events", 1): 0}
    code, _, _ = run(
        capsys, "--coordinator", url, "reset-offsets", "shift", "--topic", "events:1", "--shift-by", "+12", "--execute"
    )
    assert code == 0 and committed(url, "shift") == {("events", 0): 50, ("events", 1): 12}


@pytest.mark.parametrize(
    ("argv", "message", "status"),
    [
        (
            ["--topic", "events:0,5", "--to-current"],
            "group 'edges': --to-current: no committed offset to start from on events:5",
            3,
        ),
        (["--topic", "events:5", "--shift-by", "1"], "group 'edges': --shift-by: no committed offset to start from", 3),
        (
            ["--topic", "nothing", "--to-earliest"],
            "group 'edges': --topic nothing: the group has no committed offsets",
            3,
        ),
        (["--topic", "events:x", "--to-earliest"], "--topic 'events:x': partitions are numbers", 2),
        (["--all-topics", "--to-latest"], "--to-latest: Berth's coordinator keeps committed offsets, not the logs", 2),
    ],
)
def test_resets_that_cannot_be_planned_fail_with_one_line_and_change_nothing(
    url: str, capsys: pytest.CaptureFixture[str], argv: list[str], message: str, status: int
) -> None:
    if not committed(url, "edges"):
        asyncio.run(formed_then_left(url, "edges", {("events", 0): 10}))
    code, out, err = run(capsys, "--coordinator", url, "reset-offsets", "edges", *argv, "--execute")
    assert (code, out) == (status, "")
    assert err.startswith(f"berth-groups: error: {message}") and err.count("\n") == 1
    assert committed(url, "edges") == {("events", 0): 10}


def test_to_offset_creates_a_group_that_does_not_exist_yet(url: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "--coordinator", url, "reset-offsets", "newborn", "--shift-by", "1", "--topic", "t:0")
    assert code == 3 and "group 'newborn' does not exist: there is no committed offset to --shift-by from" in err
    code, _, err = run(
        capsys, "--coordinator", url, "reset-offsets", "newborn", "--to-offset", "42", "--topic", "t:0-1", "--execute"
    )
    assert (code, err) == (0, "")
    assert committed(url, "newborn") == {("t", 0): 42, ("t", 1): 42}
    code, out, _ = run(capsys, "--coordinator", url, "describe", "newborn", "--state")
    assert out.splitlines()[1].split()[:2] == ["newborn", "Empty"]


def test_the_coordinator_refuses_a_simple_commit_to_a_group_with_members(url: str) -> None:
    """What makes the CLI's Empty check safe against a member joining after it: the commit itself is refused."""

    async def commit() -> dict[tuple[str, int], Error]:
        async with CoordinatorAdmin(url) as admin:
            return await admin.commit_offsets("orders", {("orders", 0): 1})

    assert asyncio.run(commit()) == {("orders", 0): Error.UNKNOWN_MEMBER_ID}


def test_reset_through_the_installed_console_script(url: str) -> None:
    asyncio.run(formed_then_left(url, "scripted", {("events", 2): 500}))
    script = Path(sys.executable).with_name("berth-groups")
    argv = [str(script), "--coordinator", url, "reset-offsets", "scripted", "--all-topics", "--shift-by", "-100"]
    done = subprocess.run([*argv, "--execute"], capture_output=True, text=True, timeout=30)
    assert (done.returncode, done.stderr) == (0, ""), done.stderr
    assert done.stdout.splitlines()[1].split() == ["scripted", "events", "2", "500", "400"]
    assert committed(url, "scripted") == {("events", 2): 400}


# ------------------------------------------------------------------------------------------ remove-members, ids


@pytest.fixture(scope="module")
def mixed(url: str) -> dict[str, str]:
    """``mixed``: a static member ``mixed-0`` and a dynamic one; their member ids by instance id (or "dynamic")."""

    async def create() -> dict[str, str]:
        members = await form(url, "mixed", ["mixed-0", None])
        ids = {m.config.group_instance_id or "dynamic": m.member_id for m in members}
        for member in members:
            await member.close(leave=False)  # both stay members (the manual clock never expires them)
        return ids

    return asyncio.run(create())


def test_remove_members_by_member_id_and_then_all(
    url: str, mixed: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    dynamic = mixed["dynamic"]
    code, out, err = run(capsys, "--coordinator", url, "remove-members", "mixed", "--member-id", dynamic)
    assert (code, err) == (0, "")
    assert out.splitlines()[1].split() == ["-", dynamic, "removed"]

    code, _, err = run(capsys, "--coordinator", url, "remove-members", "mixed", "--member-id", dynamic)
    assert code == 3 and err == f"berth-groups: error: not members of group 'mixed' (UNKNOWN_MEMBER_ID): {dynamic}\n"

    code, out, _ = run(capsys, "--coordinator", url, "-o", "json", "remove-members", "mixed", "--all")
    assert code == 0
    assert json.loads(out) == {
        "group_id": "mixed",
        "members": [{"group_instance_id": "mixed-0", "member_id": "", "error": "NONE"}],
    }
    code, out, _ = run(capsys, "--coordinator", url, "remove-members", "mixed", "--all")
    assert (code, out.strip()) == (0, "group mixed has no members")


def test_remove_members_takes_instance_ids_one_by_one_too(url: str, capsys: pytest.CaptureFixture[str]) -> None:
    async def create() -> None:
        for member in await form(url, "pair", ["pair-0", "pair-1", "pair-2"]):
            await member.close()  # static: no leave

    asyncio.run(create())
    code, out, _ = run(capsys, "--coordinator", url, "remove-members", "pair", "--instance-id", "pair-0", "pair-2")
    assert code == 0
    assert [line.split()[0] for line in out.splitlines()[1:]] == ["pair-0", "pair-2"]


def test_a_group_token_describes_its_group_without_the_expected_members(
    secured_url: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Expected members need an admin token (docs/api.md §10): describe says so instead of failing."""

    async def create() -> None:
        async with aiohttp.ClientSession() as session:
            admin = Api(session, secured_url, token="the-admin-secret")
            await admin.request("PUT", "/v1/groups/orders/expected-members", {"group_instance_ids": ["orders-0"]})
            joined = await Api(session, secured_url, token="orders-app-secret").join("orders", instance_id="orders-0")
            assert joined["error"] == "NONE", joined

    asyncio.run(create())
    monkeypatch.setenv("BERTH_TOKEN", "orders-app-secret")
    code, out, _ = run(capsys, "--coordinator", secured_url, "describe", "orders")
    assert code == 0
    assert out.splitlines()[1] == "owner -  expected ? (reading them needs an admin token)"
    code, out, _ = run(capsys, "--coordinator", secured_url, "-o", "json", "describe", "orders")
    assert code == 0
    assert (json.loads(out)["expected_members"], json.loads(out)["expected_not_joined"]) == (None, None)


def test_every_failure_of_the_member_library_has_one_class() -> None:
    """Exit statuses by what a script would do about the failure (docs/member-library.md, berth-groups)."""
    path = "/v1/groups/orders"
    assert exit_code_of(AuthorizationError(401, "GROUP_AUTHORIZATION_FAILED", path=path)) == ExitCode.NOT_ALLOWED == 5
    assert exit_code_of(GroupOwnedError(409, "GROUP_OWNED", path=path, owner=None)) == ExitCode.REFUSED_BY_STATE == 4
    assert exit_code_of(RequestTooLargeError(413, "PAYLOAD_TOO_LARGE", path=path)) == ExitCode.REFUSED == 7
    assert exit_code_of(CoordinatorServerError(503, "COORDINATOR_NOT_AVAILABLE", path=path)) == ExitCode.UNAVAILABLE
    assert exit_code_of(CoordinatorUnavailableError("timed out")) == ExitCode.UNAVAILABLE == 6
    assert exit_code_of(ResponseTooLargeError(path, 100)) == ExitCode.UNAVAILABLE
    assert exit_code_of(ConfigError("--token-file", "names 'x', which is empty")) == ExitCode.USAGE == 2
    assert exit_code_of(GroupError(Error.GROUP_ID_NOT_FOUND, "describing")) == ExitCode.NOT_FOUND == 3
    assert exit_code_of(GroupError(Error.NON_EMPTY_GROUP, "deleting")) == ExitCode.REFUSED_BY_STATE
    assert exit_code_of(GroupError(Error.INVALID_GROUP_ID, "describing")) == ExitCode.REFUSED
    statuses = [code.value for code in ExitCode]
    assert len(statuses) == len(set(statuses)) and ExitCode.PARTIAL == 1 and ExitCode.CLOSED_PIPE == 141
