"""The stage controller (``tests/support/control_plane/stage_controller.py``: kwok's job) in a process of its own:
``python -m benchmarks.stage_process KUBECONFIG SELECTOR NODES WORKERS STATS``.

So that the kubelet's stand-in shares no interpreter lock with the benchmark's own watches, and its CPU-seconds are
its own. It runs until SIGTERM; every 2 s, and as it stops, it writes to ``STATS`` (JSON) the steps it took (bind,
run, delete) and the error that stopped its watch, if any.
"""

from __future__ import annotations

import json
import signal
import sys
import threading
from pathlib import Path

from benchmarks.common import ROOT

sys.path.insert(0, str(ROOT / "tests"))

from support.stage_controller import StageController


def write(path: Path, stage: StageController) -> None:
    tmp = path.with_suffix(".tmp")
    steps = {step.value: count for step, count in stage.steps.items()}
    tmp.write_text(json.dumps({"steps": steps, "error": repr(stage.error) if stage.error else None}))
    tmp.replace(path)


def main(kubeconfig: str, selector: str, nodes: str, workers: str, stats: str) -> None:
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    with StageController(Path(kubeconfig), selector, nodes=int(nodes), workers=int(workers)) as stage:
        while not stop.wait(2.0):
            write(Path(stats), stage)
    write(Path(stats), stage)


if __name__ == "__main__":
    main(*sys.argv[1:])
