"""``python -m benchmarks robustness [--runs N ...]``: the randomized fault campaign (tests/robustness), from here.

The campaign lives with the tests (its checker and loads are test code); this is its door among the benchmarks, so
that ``make robustness``, ``python -m benchmarks robustness`` and ``cd tests && python -m robustness`` are one
command. Its record, ``benchmarks/results/robustness.json``, is shown in docs/benchmarks.md ("Robustness").
"""

from __future__ import annotations

import sys

from benchmarks.common import ROOT


def main(argv: list[str] | None = None) -> int:
    sys.path.insert(0, str(ROOT / "tests"))
    from robustness.campaign import main as campaign

    return campaign(argv)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
