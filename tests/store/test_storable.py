"""``check_storable``: a write whose records hold text SQLite cannot take as UTF-8, or an integer beyond 64 bits,
in any field of any record, is refused; everything within bounds passes (the writer then fails that write alone:
``test_store_writer``)."""

from __future__ import annotations

import pytest
from store_test_data import expected_members, group_snapshot, offset

from berth.coordinator.core import OffsetAndMetadata, OffsetRecord
from berth.coordinator.store.batch import check_storable

BIG = 2**63
SMALL = -(2**63) - 1


def offsets(**changed: object) -> list[OffsetRecord]:
    """Three records of one commit; the last has ``changed`` fields (of the record, or of its value)."""
    fields: dict[str, object] = {"group_id": "g", "topic": "t", "partition": 2}
    value: dict[str, object] = {"offset": 5, "metadata": "m", "leader_epoch": 1, "commit_timestamp_ms": 9}
    for name, new in changed.items():
        (fields if name in fields else value)[name] = new
    last = OffsetRecord(**fields, value=OffsetAndMetadata(**value))  # type: ignore[arg-type]
    return [offset("g", "t", 0, 1), offset("g", "t", 1, 2), last]


@pytest.mark.parametrize(
    "changed",
    [
        {"group_id": "g-\ud800"},
        {"topic": "t-\udfff"},
        {"metadata": "\ud800"},
        {"partition": BIG},
        {"offset": BIG},
        {"offset": SMALL},
        {"leader_epoch": BIG},
        {"commit_timestamp_ms": SMALL},
    ],
    ids=lambda changed: next(iter(changed)) + ("-text" if isinstance(next(iter(changed.values())), str) else "-int"),
)
def test_an_unstorable_field_in_any_record_refuses_the_write(changed: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        check_storable(offsets(**changed))


def test_records_within_bounds_pass() -> None:
    extremes = offsets(offset=BIG - 1, commit_timestamp_ms=-BIG, metadata="ünïcode ✓", leader_epoch=None)
    check_storable([group_snapshot("g"), expected_members("g", "a"), *extremes])
    check_storable([])


def test_the_error_names_the_integer_out_of_bounds() -> None:
    with pytest.raises(ValueError, match=f"integer {BIG} does not fit in 64 bits"):
        check_storable(offsets(offset=BIG))
