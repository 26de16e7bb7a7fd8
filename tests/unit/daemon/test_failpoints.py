"""Failpoints (``berth.coordinator.daemon.failpoints``): parsed strictly, off unless named, acting as asked."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from berth.coordinator.daemon import failpoints


@pytest.fixture(autouse=True)
def reset() -> Iterator[None]:
    yield
    failpoints.configure("")


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("nowhere=crash", "NAME one of"),
        ("store.before_commit", "NAME=ACTION"),
        ("store.before_commit=explode", "the action is"),
        ("store.before_commit=sleep", "the action is"),
        ("store.before_commit=crash@0", "counts from 1"),
        ("store.before_commit=crash%2", "probability"),
        ("store.after_commit=error", "after a durable step"),
        ("operator.before_leave=delay", "the action is"),
        ("store.before_commit=delay:100", "where an event loop awaits"),
        ("store.before_commit=sleep:relative/file", "milliseconds or an absolute path"),
    ],
)
def test_a_wrong_setting_is_refused_with_what_is_wrong(text: str, says: str) -> None:
    with pytest.raises(ValueError, match=says):
        failpoints.parse(text)


def test_nothing_happens_unless_a_point_is_named() -> None:
    failpoints.configure("")
    failpoints.hit("store.before_commit")
    assert not failpoints.enabled("bug.ack_failed_writes")


def test_error_on_the_nth_hit_only() -> None:
    failpoints.configure("store.before_commit=error@3")
    failpoints.hit("store.before_commit")
    failpoints.hit("store.before_commit")
    with pytest.raises(failpoints.FailpointError):
        failpoints.hit("store.before_commit")
    failpoints.hit("store.before_commit")


def test_a_probability_is_repeatable_from_its_seed() -> None:
    def hits(seed: str) -> list[bool]:
        failpoints.configure("engine.parked=error%0.5", seed)
        out = []
        for _ in range(40):
            try:
                failpoints.hit("engine.parked")
                out.append(False)
            except failpoints.FailpointError:
                out.append(True)
        return out

    assert hits("7") == hits("7")
    assert 5 < sum(hits("7")) < 35


def test_switches_are_on_only_when_named() -> None:
    failpoints.configure("bug.ack_failed_writes=on")
    assert failpoints.enabled("bug.ack_failed_writes")
    assert not failpoints.enabled("bug.ignore_leader_key")
    failpoints.hit("bug.ack_failed_writes")  # a switch does nothing where it is passed


def test_crash_ends_the_process_as_kill_9_would() -> None:
    code = "from berth.coordinator.daemon import failpoints; failpoints.hit('load.record'); print('survived')"
    result = subprocess.run(
        [sys.executable, "-c", code],
        env={"BERTH_FAILPOINTS": "load.record=crash", "PATH": ""},
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == failpoints.CRASH_STATUS
    assert "survived" not in result.stdout


def test_a_delay_holds_the_awaiting_step_while_the_event_loop_goes_on() -> None:
    failpoints.configure("operator.before_leave=delay:300@1")

    async def held() -> float:
        started = time.monotonic()
        beside = asyncio.create_task(asyncio.sleep(0.05))
        await failpoints.reached("operator.before_leave")
        assert beside.done()  # the other task ran to its end meanwhile: the event loop went on
        return time.monotonic() - started

    assert asyncio.run(held()) >= 0.3
    second = failpoints.reached("operator.before_leave")  # @1: the second pass goes straight on, never suspended
    with pytest.raises(StopIteration):
        second.send(None)


def test_a_point_passed_on_an_event_loop_takes_the_other_actions_as_hit_does() -> None:
    failpoints.configure("operator.after_leave=error")
    with pytest.raises(failpoints.FailpointError):
        asyncio.run(failpoints.reached("operator.after_leave"))


def test_a_delay_until_a_file_holds_the_step_until_the_test_creates_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    go = tmp_path / "go"
    failpoints.configure(f"operator.before_leave=delay:{go}@1")

    async def held() -> list[str]:
        order: list[str] = []
        step = asyncio.create_task(failpoints.reached("operator.before_leave"))
        step.add_done_callback(lambda _: order.append("step"))
        await asyncio.sleep(0.2)  # a hundred times the file's poll: the step is still held
        order.append("created")
        go.touch()
        await step
        return order

    assert asyncio.run(held()) == ["created", "step"]
    assert f"failpoint operator.before_leave: waiting for {go}" in capsys.readouterr().err


def test_a_sleep_until_a_file_blocks_the_thread_until_it_exists(tmp_path: Path) -> None:
    go = tmp_path / "go"
    failpoints.configure(f"store.before_commit=sleep:{go}")
    done = threading.Event()
    blocked = threading.Thread(target=lambda: (failpoints.hit("store.before_commit"), done.set()))
    blocked.start()
    assert not done.wait(0.2)
    go.touch()
    assert done.wait(10)
    blocked.join()
