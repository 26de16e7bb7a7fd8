"""``python -m benchmarks [NAME ...] [--report-only]``: run benchmarks, save their results, regenerate the report.
``python -m benchmarks robustness [--runs N ...]`` runs the randomized fault campaign instead (``robustness``).

Without names it runs them all (``make bench``), which takes a while: the slowest waits out a 45 s session
timeout on purpose, and the 100-member rolling restart of dynamic members rebalances a hundred times.
"""

from __future__ import annotations

import argparse
import importlib
import sys
import time

from benchmarks import report
from benchmarks.common import progress

BENCHMARKS = {
    "heartbeat": "benchmarks.heartbeat",
    "rebalance": "benchmarks.rebalance",
    "rolling_restart": "benchmarks.rolling_restart",
    "scale_down": "benchmarks.scale_down",
    "scale_up": "benchmarks.scale_up",
    "durable_writes": "benchmarks.durable_writes",
    "reload": "benchmarks.reload",
    "pipeline": "benchmarks.pipeline_bench",
    "kafka_scale_down": "benchmarks.kafka_scale_down",
    "kafka_consumer_protocol": "benchmarks.kafka_consumer_protocol",
    "static_restart": "benchmarks.static_restart",
    "status_lag": "benchmarks.status_lag",
    "operator_scale": "benchmarks.operator_scale",
    "operator_pods": "benchmarks.operator_pods",
    "operator_takeover": "benchmarks.operator_takeover",
    "failover": "benchmarks.failover",
    "operator_metrics": "benchmarks.operator_metrics",
}


def main(argv: list[str] | None = None) -> int:
    given = sys.argv[1:] if argv is None else argv
    if given[:1] == ["robustness"]:
        from benchmarks import robustness

        code = robustness.main(given[1:])
        report.main()
        return code
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__)
    parser.add_argument("names", nargs="*", choices=[*BENCHMARKS, []], help="benchmarks to run (default: all)")
    parser.add_argument("--report-only", action="store_true", help="only regenerate docs/benchmarks.md")
    args = parser.parse_args(argv)
    if not args.report_only:
        for name in args.names or list(BENCHMARKS):
            started = time.monotonic()
            progress(f"--- {name}")
            result = importlib.import_module(BENCHMARKS[name]).main()
            result.save()
            progress(f"{name}: {result.summary} (goal met: {result.met}; {time.monotonic() - started:.0f} s)")
    report.main()
    return 0


if __name__ == "__main__":
    sys.exit(main())
