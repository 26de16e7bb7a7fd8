"""The member library and the admin client against a coordinator served over HTTPS (issue 12, item 15; docs/
member-library.md "TLS"), with a CA and certificates made by ``openssl``: a member given the CA forms its group and
commits; a client without it does not trust the coordinator and sends it nothing; ``$BERTH_CA_FILE`` is the admin
client's default, so a process given the CA in its environment (the operator, in the chart) verifies as well.
"""

from __future__ import annotations

import ssl
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import aiohttp
import pytest
from member_harness import REBALANCE_TIMEOUT_MS, member_config, until_listed
from support.api import Api
from support.certs import Pair, install, make_ca, make_server_cert, openssl_or_skip
from support.coordinator import CoordinatorProcess, secured_coordinator

from berth.coordinator.client import CoordinatorAdmin, CoordinatorUnavailableError, GroupMember
from berth.coordinator.groups.groups_cli import main as groups_main

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def ca(tmp_path: Path) -> Pair:
    openssl_or_skip()
    return make_ca(tmp_path / "ca")


@pytest.fixture
def secured(tmp_path: Path, ca: Pair) -> Iterator[CoordinatorProcess]:
    live = Pair(tmp_path / "tls.crt", tmp_path / "tls.key")
    install(make_server_cert(tmp_path / "issued", ca, 7), live)
    with secured_coordinator(tmp_path, tls=live) as proc:
        yield proc


@pytest.fixture
async def api(secured: CoordinatorProcess, ca: Pair) -> AsyncIterator[Api]:
    context = ssl.create_default_context(cafile=str(ca.cert))
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=context)) as session:
        yield Api(session, secured.url)


async def test_a_member_given_the_ca_forms_its_group_and_commits(
    secured: CoordinatorProcess, api: Api, ca: Pair
) -> None:
    assert secured.url.startswith("https://")
    member = GroupMember(member_config(secured.url, "secure", "secure-0", ca_file=str(ca.cert)))
    try:
        await member.start()
        await until_listed(api, member)
        await api.advance(REBALANCE_TIMEOUT_MS)
        state = await member.wait_until_stable()
        assert state.generation_id == 1
        await member.commit({("orders", 0): 42})
        async with CoordinatorAdmin(secured.url, ca_file=str(ca.cert)) as admin:
            assert (await admin.fetch_offsets("secure"))[("orders", 0)].offset == 42
    finally:
        await member.close()


async def test_without_the_ca_the_coordinator_is_not_trusted(
    secured: CoordinatorProcess, ca: Pair, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("BERTH_CA_FILE", raising=False)
    async with CoordinatorAdmin(secured.url, attempts=1, token="never-sent-token") as untrusting:
        with pytest.raises(CoordinatorUnavailableError, match="certificate verify failed"):
            await untrusting.config()
    monkeypatch.setenv("BERTH_CA_FILE", str(ca.cert))  # the chart gives the operator the CA this way
    async with CoordinatorAdmin(secured.url, attempts=1) as trusting:
        assert (await trusting.config()).group_min_session_timeout_ms == 6_000


def test_berth_groups_verifies_with_its_ca_file(
    secured: CoordinatorProcess, ca: Pair, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("BERTH_CA_FILE", raising=False)
    assert groups_main(["--coordinator", secured.url, "--ca-file", str(ca.cert), "list"]) == 0
    assert capsys.readouterr().out.strip() == "no groups"
    assert groups_main(["--coordinator", secured.url, "list"]) == 6  # unavailable: nothing was sent
    assert "certificate verify failed" in capsys.readouterr().err
