"""``python -m berth.coordinator.client.example``, the consumer the deploy examples run, as a real process."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys

import pytest
from member_harness import REBALANCE_TIMEOUT_MS, group_journal, until_instance_listed
from support.api import Api
from support.coordinator import CoordinatorProcess

from berth.coordinator.client import CoordinatorAdmin
from berth.coordinator.client.config import MemberConfig
from berth.coordinator.client.errors import CoordinatorUnavailableError
from berth.coordinator.client.example import ExampleConsumer, run
from berth.coordinator.protocol import TopicPartition

pytestmark = pytest.mark.timeout(60)


def example_env(**variables: str) -> dict[str, str]:
    inherited = {k: v for k, v in os.environ.items() if not k.startswith("BERTH_")}
    return {**inherited, "PYTHONUNBUFFERED": "1", **variables}


async def read_until(stream: asyncio.StreamReader, text: str, seen: list[str]) -> str:
    while True:
        line = (await stream.readline()).decode()
        if not line:
            raise AssertionError(f"output ended before a line with {text!r}; got {seen}")
        seen.append(line.rstrip("\n"))
        if text in line:
            return line.rstrip("\n")


async def test_example_consumes_what_it_owns_commits_and_stops_without_leaving(
    coordinator: CoordinatorProcess, api: Api
) -> None:
    env = example_env(
        BERTH_GROUP_ID="shop",
        BERTH_GROUP_INSTANCE_ID="shop-0",
        BERTH_COORDINATOR_URL=coordinator.url,
        BERTH_SESSION_TIMEOUT_MS="10000",
        BERTH_REBALANCE_TIMEOUT_MS=str(REBALANCE_TIMEOUT_MS),
        BERTH_HEARTBEAT_INTERVAL_MS="100",
        BERTH_EXAMPLE_COMMIT_INTERVAL_S="0.05",
    )  # no BERTH_TOPICS, as in a plain ConsumerFleet: one topic named like the group, 12 partitions
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "berth.coordinator.client.example", env=env, stdout=asyncio.subprocess.PIPE
    )
    assert process.stdout is not None
    seen: list[str] = []
    try:
        await until_instance_listed(api, "shop", "shop-0")
        await api.advance(REBALANCE_TIMEOUT_MS)
        owns = await read_until(process.stdout, " owns ", seen)
        committed = await read_until(process.stdout, " committed ", seen)
        process.send_signal(signal.SIGTERM)
        rest = (await process.stdout.read()).decode().splitlines()
        assert await process.wait() == 0
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()

    everything = "shop[0,1,2,3,4,5,6,7,8,9,10,11]"
    assert owns == f"shop-0 generation 1 (leader) owns {everything} (+{everything} -nothing)"
    assert committed.startswith("shop-0 committed shop[0]=10 ")
    assert rest[-2:] == ["shop-0 revoked shop[0,1,2,3,4,5,6,7,8,9,10,11]", "shop-0 stopped"]
    assert not [e for e in await group_journal(api, "shop") if e["type"] == "member_left"]  # static: no leave
    async with CoordinatorAdmin(coordinator.url) as admin:
        offsets = await admin.fetch_offsets("shop")
    assert set(offsets) == {("shop", p) for p in range(12)} and offsets[("shop", 0)].offset >= 10


async def test_example_exits_2_naming_a_malformed_variable() -> None:
    env = example_env(BERTH_GROUP_ID="shop", BERTH_SESSION_TIMEOUT_MS="soon")
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "berth.coordinator.client.example", env=env, stderr=asyncio.subprocess.PIPE
    )
    _, stderr = await process.communicate()
    assert process.returncode == 2
    assert stderr.decode().strip() == (
        "example: configuration error: BERTH_SESSION_TIMEOUT_MS value must be a positive decimal integer, got 'soon'"
    )


async def test_a_commit_left_unanswered_past_the_retries_is_reported_and_the_next_one_carries_its_offsets(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # Regression (the node tier's move to the replicated coordinator took 72 s, past the commit's 60 s of retries):
    # the commit raised out of the consuming loop, which ended unseen, and the pod stayed in its group committing
    # nothing ever again.
    consumer = ExampleConsumer(MemberConfig("shop", {"shop": 1}, group_instance_id="shop-0"), commit_interval_s=0.01)
    partition: TopicPartition = ("shop", 0)
    consumer.positions = {partition: 0}
    sent: list[int] = []
    second = asyncio.Event()

    async def commit(offsets: dict[TopicPartition, int]) -> None:
        sent.append(offsets[partition])
        if len(sent) == 1:
            raise CoordinatorUnavailableError("offset commit to group 'shop': no answer within 60 s")
        second.set()

    consumer.member.commit = commit  # type: ignore[method-assign,assignment]
    consuming = asyncio.create_task(consumer.consume_forever())
    try:
        async with asyncio.timeout(10):
            await second.wait()
    finally:
        consuming.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await consuming
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "shop-0 commit not answered: offset commit to group 'shop': no answer within 60 s"
    assert lines[1] == f"shop-0 committed shop[0]={sent[1]}" and sent[1] > sent[0]


async def test_a_consuming_loop_that_fails_stops_the_process_instead_of_leaving_a_member_that_never_commits(
    coordinator: CoordinatorProcess, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def broken(self: ExampleConsumer) -> None:
        raise RuntimeError("the consuming loop broke")

    monkeypatch.setattr(ExampleConsumer, "consume_forever", broken)
    config = MemberConfig("shop", {"shop": 1}, coordinator_url=coordinator.url, group_instance_id="shop-0")
    running = asyncio.create_task(run(config, commit_interval_s=0.05))
    try:
        await asyncio.wait({running}, timeout=30)
        assert running.done(), "the example still runs 30 s after its consuming loop failed"
        with pytest.raises(RuntimeError, match="the consuming loop broke"):
            running.result()
    finally:
        running.cancel()
        with contextlib.suppress(asyncio.CancelledError, RuntimeError):
            await running
