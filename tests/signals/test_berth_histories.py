"""Every value signal checked against ground truth, on Berth's coordinator (issue 30, "What to build 2").

Hypothesis generates histories of a fleet — its settings (``leaveOnScaleDown``, ``preRegister``, OrderedReady or
Parallel) and an interleaving of pod deletes, evictions (a drain, under the fleet's budget), crashes short and long,
rolls (some with a new subscription), scale-ups and downs, time passing and operator passes — and the signal lab
(``support.signal_lab``) plays each one: the operator's real pass against a real coordinator process on its manual
clock, its members speaking the coordinator's protocol. The oracle (``support.signal_oracle``) then compares every
Event, ``status.restarts``, ``status.lastScaleDown``, ``status.foreignMembers`` and the metrics with the
coordinator's journal and what the lab did to the pods: a history passes with no wrong signal.

``make test`` runs a fixed-seed few (``BERTH_SIGNAL_HISTORIES``, 10 by default); ``make soak`` runs 200 from a seed
of its own (``BERTH_SIGNAL_SEED``) and writes the figures to ``BERTH_SIGNAL_RESULTS``.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections.abc import Iterator
from pathlib import Path

import aiohttp
import pytest
from hypothesis import HealthCheck, Phase, given, seed, settings
from support.coordinator import CoordinatorProcess
from support.signal_berth import BerthRig
from support.signal_histories import histories
from support.signal_lab import History, Lab
from support.signal_oracle import describe, wrong_signals

HISTORIES = int(os.environ.get("BERTH_SIGNAL_HISTORIES", "10"))
SEED = int(os.environ.get("BERTH_SIGNAL_SEED", "30"))
RESULTS = os.environ.get("BERTH_SIGNAL_RESULTS")
PHASES = (Phase.explicit, Phase.generate, *((Phase.shrink,) if os.environ.get("BERTH_SIGNAL_SHRINK") else ()))


@pytest.fixture(scope="module")
def lab_coordinator(tmp_path_factory: pytest.TempPathFactory) -> Iterator[CoordinatorProcess]:
    """One coordinator on its manual clock for every history (each has a group of its own)."""
    process = CoordinatorProcess(tmp_path_factory.mktemp("signals") / "data")
    process.start()
    yield process
    process.kill()


class Tally:
    histories = 0
    events = 0
    passes = 0
    started = 0.0


@pytest.mark.timeout(300 + 60 * HISTORIES)  # 5 s a history quiet on 2 cores, 20 s busy: green when busy
def test_every_signal_agrees_with_the_journal_over_generated_histories(lab_coordinator: CoordinatorProcess) -> None:
    Tally.started = time.monotonic()
    names = iter(range(1, 1 << 20))

    @seed(SEED)
    @settings(
        max_examples=HISTORIES,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
        database=None,
        # A history takes seconds: shrinking one takes many minutes, so only where asked (BERTH_SIGNAL_SHRINK=1);
        # a failure prints its whole history, the journal and what was said instead.
        phases=PHASES,
    )
    @given(histories)
    def one(history: History) -> None:
        record = asyncio.run(play(lab_coordinator.url, f"h{next(names)}", history))
        Tally.histories += 1
        Tally.events += len(record.said)
        Tally.passes += len(record.statuses)
        wrong = wrong_signals(record)
        assert not wrong, "\n".join(wrong) + "\n" + describe(record)

    one()
    elapsed = time.monotonic() - Tally.started
    print(
        f"\nBerth's coordinator: {Tally.histories} generated histories, {Tally.passes} passes, {Tally.events} Events,"
        f" 0 wrong signals ({elapsed:.0f} s, seed {SEED})"
    )
    if RESULTS:
        figures = {
            "coordinator": "berth",
            "histories": Tally.histories,
            "passes": Tally.passes,
            "events": Tally.events,
            "wrong": 0,
            "seconds": round(elapsed),
            "seed": SEED,
        }
        Path(RESULTS).write_text(json.dumps(figures, indent=2) + "\n")


async def play(url: str, name: str, history: History) -> object:
    async with aiohttp.ClientSession() as session:
        rig = await BerthRig(url, session).start()
        return await Lab(rig, name, history).run()
