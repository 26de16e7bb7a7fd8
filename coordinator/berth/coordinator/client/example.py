"""A runnable consumer: ``python -m berth.coordinator.client.example`` joins its group and "consumes" what it owns.

Configured by the ``BERTH_*`` environment the operator injects (``MemberConfig.from_env``). When
``BERTH_TOPICS`` is not set it subscribes to one topic named like the group with 12 partitions, so the pods of a
plain ConsumerFleet run it as is. There is no broker: consuming a partition means advancing a counter from the
committed offset, printing what the member owns after every rebalance and committing every
``BERTH_EXAMPLE_COMMIT_INTERVAL_S`` seconds (5 by default).

It prints one line per event, e.g.::

    orders-0 generation 3 (leader) owns orders[0,1,2,3] (+orders[3] -nothing)
    orders-0 committed orders[0]=120 orders[1]=120 ...

Rules it demonstrates: commit in ``on_revoked`` (the last chance before the partitions move), resume from the
committed offsets in ``on_assigned``, stop cleanly on SIGTERM/SIGINT (a static member does not leave: its restart
costs no rebalance), and exit non-zero with the reason when fenced (a duplicate ``group.instance.id``). A commit
the coordinator could not answer within the library's retries (an outage longer than them: a move to the
replicated coordinator, a failover that takes long) is reported and not fatal: the positions keep advancing and the
next commit carries them. Anything else that stops the consuming loop stops the process, non-zero, so that a pod
never stays in its group without committing.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import sys

from berth.coordinator.client.config import ENV_GROUP_ID, ENV_TOPICS, MemberConfig
from berth.coordinator.client.errors import (
    BerthClientError,
    CommitFailedError,
    ConfigError,
    CoordinatorUnavailableError,
)
from berth.coordinator.client.member import GroupMember
from berth.coordinator.client.state import AssignmentChange
from berth.coordinator.protocol import TopicPartition

#: Seconds between commits, unless ``BERTH_EXAMPLE_COMMIT_INTERVAL_S`` says otherwise.
ENV_COMMIT_INTERVAL_S = "BERTH_EXAMPLE_COMMIT_INTERVAL_S"
DEFAULT_COMMIT_INTERVAL_S = 5.0
#: Records "consumed" per partition per commit interval.
RECORDS_PER_INTERVAL = 10


class ExampleConsumer:
    """Tracks a position per owned partition; commits them on a timer and on revocation."""

    def __init__(self, config: MemberConfig, commit_interval_s: float) -> None:
        self.name = config.group_instance_id or config.client_id
        self.commit_interval_s = commit_interval_s
        self.positions: dict[TopicPartition, int] = {}
        self.member = GroupMember(config, on_assigned=self.on_assigned, on_revoked=self.on_revoked)

    async def on_assigned(self, change: AssignmentChange) -> None:
        committed = await self.member.committed()
        self.positions = {tp: committed[tp].offset if tp in committed else 0 for tp in sorted(change.partitions)}
        role = " (leader)" if change.is_leader else ""
        print(
            f"{self.name} generation {change.generation_id}{role} owns {_partitions(change.partitions)} "
            f"(+{_partitions(change.added)} -{_partitions(change.removed)})",
            flush=True,
        )

    async def on_revoked(self, partitions: frozenset[TopicPartition]) -> None:
        await self.commit()
        print(f"{self.name} revoked {_partitions(partitions)}", flush=True)
        self.positions = {}

    async def consume_forever(self) -> None:
        while True:
            await asyncio.sleep(self.commit_interval_s)
            for tp in self.positions:
                self.positions[tp] += RECORDS_PER_INTERVAL
            await self.commit()

    async def commit(self) -> None:
        if not self.positions:
            return
        try:
            await self.member.commit(dict(self.positions))
        except CommitFailedError as error:  # the group moved on; the next assignment resumes from the last commit
            print(f"{self.name} commit refused: {error}", flush=True)
            return
        except CoordinatorUnavailableError as error:  # an outage past the retries: the next commit carries these
            print(f"{self.name} commit not answered: {error}", flush=True)
            return
        offsets = " ".join(f"{topic}[{partition}]={offset}" for (topic, partition), offset in self.positions.items())
        print(f"{self.name} committed {offsets}", flush=True)


async def run(config: MemberConfig, commit_interval_s: float = DEFAULT_COMMIT_INTERVAL_S) -> None:
    consumer = ExampleConsumer(config, commit_interval_s)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    async with consumer.member as member:
        consuming = asyncio.create_task(consumer.consume_forever())
        stopping = asyncio.create_task(stop.wait())
        running = asyncio.create_task(member.run())
        try:
            await asyncio.wait({stopping, running, consuming}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (consuming, stopping):
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task  # raises what ended the consuming loop, when it ended on its own
        if running.done():
            running.result()  # raises the fatal error that stopped the member
        running.cancel()
    print(f"{consumer.name} stopped", flush=True)


def config_from_environment() -> tuple[MemberConfig, float]:
    """The member's config (``BERTH_TOPICS`` defaulting to ``<group>:12``) and the commit interval."""
    env = dict(os.environ)
    if not env.get(ENV_TOPICS) and env.get(ENV_GROUP_ID):
        env[ENV_TOPICS] = f"{env[ENV_GROUP_ID]}:12"
    text = env.get(ENV_COMMIT_INTERVAL_S, "").strip()
    try:
        interval = float(text) if text else DEFAULT_COMMIT_INTERVAL_S
    except ValueError:
        interval = -1.0
    if not interval > 0:
        raise ConfigError(ENV_COMMIT_INTERVAL_S, f"must be a positive number of seconds, got {text!r}")
    return MemberConfig.from_env(env), interval


def main() -> int:
    logging.basicConfig(level=os.environ.get("BERTH_LOG_LEVEL", "WARNING").upper(), stream=sys.stderr)
    try:
        config, commit_interval_s = config_from_environment()
    except ConfigError as error:
        print(f"example: configuration error: {error}", file=sys.stderr)
        return 2
    try:
        asyncio.run(run(config, commit_interval_s))
    except BerthClientError as error:
        print(f"example: stopped: {error}", file=sys.stderr)
        return 1
    return 0


def _partitions(partitions: frozenset[TopicPartition] | set[TopicPartition]) -> str:
    if not partitions:
        return "nothing"
    by_topic: dict[str, list[int]] = {}
    for topic, number in sorted(partitions):
        by_topic.setdefault(topic, []).append(number)
    return " ".join(f"{topic}{numbers}".replace(" ", "") for topic, numbers in by_topic.items())


if __name__ == "__main__":
    sys.exit(main())
