"""Reading a Prometheus text exposition in tests: the value of one unlabelled sample, whatever its number format
(prometheus-client writes ``1.0`` where a hand-written exposition wrote ``1``)."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families


def samples(text: str) -> dict[str, float]:
    """Every sample without labels, by name."""
    return {
        sample.name: sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if not sample.labels
    }
