"""``advice.json`` round-trips between its writer and its reader: whatever advice rows the pipeline writes
(``berth.pipeline.advice.advice_document``, serialised as ``berth-analyze`` writes it), the operator's advice source
(``adapters.advice_source.AdviceSource`` over the file, the reader it runs) reads back group for group, and both
hold to the one declaration (``berth.coordinator.formats.advice``)."""

from __future__ import annotations

import asyncio
import json
import typing
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from berth.coordinator.formats.advice import ENTRY_FIELDS, AdviceDocument, AdviceEntry, GroupAdvice
from berth.operator.adapters.advice_source import AdviceSource
from berth.pipeline.advice import ADVICE_COLUMNS, JournalStats, advice_document
from berth.pipeline.analyze import ADVICE_FILE

KEYS = st.one_of(
    st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=1, max_size=20),
    st.builds(
        lambda group: f"kafka://kafka-0.kafka.data:9092/{group}",
        st.from_regex(r"[a-z][a-z0-9.-]{0,20}", fullmatch=True),
    ),
)
ROWS = st.fixed_dictionaries(
    {
        "advised_session_timeout_ms": st.integers(1, 1_800_000),
        "samples": st.integers(0, 10**9),
        "percentile": st.floats(0.5, 1.0),
        "restart_gap_p_ms": st.integers(0, 10**9),
        "safety_margin": st.floats(1.0, 10.0),
        "heartbeat_interval_ms": st.integers(1, 60_000),
        "min_ms": st.integers(1, 60_000),
        "max_ms": st.integers(60_000, 1_800_000),
        "confident": st.booleans(),
        "reason": st.text(max_size=80),
    }
)


def read_back(path: Path, text: str) -> Any:
    path.write_text(text)
    return asyncio.run(AdviceSource(file=path, ttl_s=0.0).current())


@settings(max_examples=150, deadline=None)
@given(st.dictionaries(KEYS, ROWS, max_size=6), st.integers(0, 2**53))
def test_what_the_pipeline_writes_the_operator_reads_group_for_group(
    tmp_path_factory: Any, groups: dict[str, dict[str, Any]], generated_at_ms: int
) -> None:
    rows = [{"group_id": key, **entry} for key, entry in groups.items()]
    document = advice_document(rows, JournalStats(10, 0, 1, 2), generated_at_ms)
    text = json.dumps(document, indent=2) + "\n"  # as berth-analyze writes advice.json

    reading = read_back(tmp_path_factory.mktemp("advice") / ADVICE_FILE, text)

    assert reading.problems == ()
    assert reading.advice is not None and reading.advice.generated_at_ms == generated_at_ms
    assert reading.advice.groups == {
        key: GroupAdvice(entry["advised_session_timeout_ms"], entry["samples"], entry["confident"], entry["reason"])
        for key, entry in groups.items()
    }
    assert list(document["groups"]) == sorted(groups)


def test_the_writer_and_the_reader_hold_to_the_one_declaration() -> None:
    """The pipeline's columns are the declaration's fields in order; the document's keys are its keys; every field
    the operator reads is declared, with the type it reads it as."""
    assert ("group_id", *ENTRY_FIELDS) == ADVICE_COLUMNS
    document = advice_document([], JournalStats(0, 0, 0, 0), 1)
    assert set(document) == set(AdviceDocument.__annotations__)
    declared = typing.get_type_hints(AdviceEntry)
    read = typing.get_type_hints(GroupAdvice)
    assert {name: declared[name] for name in read} == read


def test_a_document_the_pipeline_did_not_write_is_a_problem_said_and_no_advice(tmp_path: Path) -> None:
    reading = read_back(tmp_path / ADVICE_FILE, json.dumps({"version": 0, "groups": {}}))
    assert reading.advice is None
    assert reading.problems == (f"{tmp_path / ADVICE_FILE}: advice.json: version must be an integer >= 1, not 0",)
