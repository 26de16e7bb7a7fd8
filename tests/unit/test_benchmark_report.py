"""``benchmarks.report``: the report names every machine its rows were measured on, not only the first's."""

from __future__ import annotations

from benchmarks.report import machines

AMD = {"cpu": "AMD EPYC", "cores": 2, "python": "3.11.7"}
INTEL = {"cpu": "Intel(R) Xeon(R) Processor", "cores": 2, "python": "3.11.7"}


def test_each_machine_lists_its_rows_and_when_they_were_measured() -> None:
    numbered = [
        (1, {**AMD, "date": "2026-11-24"}),
        (2, {**INTEL, "date": "2026-11-29"}),
        (3, {**AMD, "date": "2026-11-30"}),
    ]
    assert machines(numbered) == [
        "- AMD EPYC, 2 cores, Python 3.11.7: rows 1, 3, measured 2026-11-24 to 2026-11-30.",
        "- Intel(R) Xeon(R) Processor, 2 cores, Python 3.11.7: row 2, measured 2026-11-29.",
    ]


def test_a_result_without_its_machine_is_said_unknown() -> None:
    assert machines([(4, {})]) == ["- ?, ? cores, Python ?: row 4, measured ?."]
