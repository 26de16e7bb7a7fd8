"""Berth's reproducible benchmarks: ``make bench`` or ``python -m benchmarks [NAME ...]``.

Each benchmark prints its figures, writes ``benchmarks/results/<name>.json`` and the runner regenerates
``docs/benchmarks.md`` (and the scaling plots) from every results file. Figures are medians of several runs
with min and max; comparisons are ratios measured side by side in one run. Nothing here is a test.
"""
