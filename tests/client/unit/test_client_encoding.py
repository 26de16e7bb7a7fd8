"""The member library's subscription and assignment bytes: exact encoding, lenient reading, clear refusals."""

from __future__ import annotations

import contextlib
import json
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from berth.coordinator.client.encoding import (
    Assignment,
    EncodingError,
    Subscription,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)

FORMATS_MD = Path(__file__).resolve().parents[3] / "docs" / "formats.md"

topic_names = st.text(min_size=1, max_size=12)
partition_lists = st.lists(st.integers(min_value=0, max_value=10_000), max_size=8).map(tuple)
partitions_by_topic = st.dictionaries(topic_names, partition_lists, max_size=4)
user_datas = st.none() | st.text(max_size=20)
subscriptions = st.builds(
    Subscription,
    topics=st.lists(topic_names, max_size=5).map(tuple),
    owned_partitions=partitions_by_topic,
    user_data=user_datas,
)
assignments = st.builds(Assignment, partitions=partitions_by_topic, user_data=user_datas)


def test_a_subscription_is_compact_sorted_json():
    subscription = Subscription(topics=("payments", "orders"), owned_partitions={"orders": (3, 0)})

    assert encode_subscription(subscription) == (
        b'{"owned_partitions":{"orders":[0,3]},"topics":["orders","payments"],"user_data":null,"version":1}'
    )


def test_an_assignment_is_compact_sorted_json():
    assignment = Assignment(partitions={"orders": (2, 0, 1)}, user_data="gen-7")

    assert encode_assignment(assignment) == b'{"partitions":{"orders":[0,1,2]},"user_data":"gen-7","version":1}'


def test_non_ascii_text_is_written_as_utf8_not_escaped():
    encoded = encode_assignment(Assignment(partitions={}, user_data="zoné"))

    assert "zoné".encode() in encoded


def test_text_that_utf8_cannot_hold_is_refused_when_encoding():
    with pytest.raises(EncodingError, match="UTF-8"):
        encode_assignment(Assignment(partitions={}, user_data="\ud800"))


def test_values_are_sets_so_order_and_duplicates_do_not_matter():
    assert Subscription(("b", "a", "a"), {"t": (3, 1, 1)}) == Subscription(("a", "b"), {"t": (1, 3)})
    assert hash(Subscription(("b", "a"), {"t": (3, 1)})) == hash(Subscription(("a", "b"), {"t": (1, 3)}))


def test_values_cannot_be_changed_after_they_are_built():
    assignment = Assignment(partitions={"orders": (0,)})

    with pytest.raises(TypeError):
        assignment.partitions["orders"] = (1,)  # type: ignore[index]


def test_a_negative_partition_number_is_refused():
    with pytest.raises(ValueError, match="negative"):
        Assignment(partitions={"orders": (-1,)})


def test_empty_bytes_are_the_empty_assignment_the_coordinator_sends_a_member_without_one():
    assert decode_assignment(b"") == Assignment(partitions={}, user_data=None)


def test_empty_bytes_are_not_a_subscription():
    with pytest.raises(EncodingError):
        decode_subscription(b"")


def test_readers_accept_newer_versions_and_ignore_fields_they_do_not_know():
    data = b'{"version": 3, "partitions": {"orders": [4, 1]}, "user_data": null, "epoch": 9}'

    assert decode_assignment(data) == Assignment(partitions={"orders": (1, 4)})


@pytest.mark.parametrize(
    "data",
    [
        pytest.param(b"\x00\x01\x02\x03", id="another client's binary encoding"),
        pytest.param(b"\xff\xfe{}", id="not UTF-8"),
        pytest.param(b"not json", id="not JSON"),
        pytest.param(b"[]", id="not an object"),
        pytest.param(b'{"partitions": {}, "user_data": null}', id="no version"),
        pytest.param(b'{"version": 0, "partitions": {}, "user_data": null}', id="version 0"),
        pytest.param(b'{"version": true, "partitions": {}, "user_data": null}', id="boolean version"),
        pytest.param(b'{"version": 1, "user_data": null}', id="no partitions"),
        pytest.param(b'{"version": 1, "partitions": []}', id="partitions not an object"),
        pytest.param(b'{"version": 1, "partitions": {"t": [-1]}, "user_data": null}', id="negative partition"),
        pytest.param(b'{"version": 1, "partitions": {"t": [1.0]}, "user_data": null}', id="float partition"),
        pytest.param(b'{"version": 1, "partitions": {"t": [true]}, "user_data": null}', id="boolean partition"),
        pytest.param(b'{"version": 1, "partitions": {"t": 1}, "user_data": null}', id="partition not in a list"),
        pytest.param(b'{"version": 1, "partitions": {}}', id="no user_data"),
        pytest.param(b'{"version": 1, "partitions": {}, "user_data": 7}', id="user_data not text"),
        pytest.param(b"[" * 100_000 + b"]" * 100_000, id="nested too deep"),
    ],
)
def test_bytes_that_are_not_an_assignment_are_refused_clearly(data):
    with pytest.raises(EncodingError, match="not a Berth assignment"):
        decode_assignment(data)


@pytest.mark.parametrize(
    "data",
    [
        pytest.param(b'{"version": 1, "owned_partitions": {}, "user_data": null}', id="no topics"),
        pytest.param(
            b'{"version": 1, "topics": "orders", "owned_partitions": {}, "user_data": null}', id="topics text"
        ),
        pytest.param(b'{"version": 1, "topics": [1], "owned_partitions": {}, "user_data": null}', id="topic number"),
        pytest.param(b'{"version": 1, "topics": [], "user_data": null}', id="no owned_partitions"),
        pytest.param(b'{"version": 1, "partitions": {}, "user_data": null}', id="an assignment"),
    ],
)
def test_bytes_that_are_not_a_subscription_are_refused_clearly(data):
    with pytest.raises(EncodingError, match="not a Berth subscription"):
        decode_subscription(data)


def test_the_examples_in_formats_md_decode():
    section = FORMATS_MD.read_text(encoding="utf-8").split("## Member library encoding", 1)[1].split("\n## ", 1)[0]
    subscription_example, assignment_example = re.findall(r"`(\{\"version\".*?\})`", section)

    assert decode_subscription(subscription_example.encode()) == Subscription(
        topics=("orders",), owned_partitions={"orders": (0, 3)}, user_data=None
    )
    assert decode_assignment(assignment_example.encode()) == Assignment(partitions={"orders": (0, 1, 2)})
    # The documented examples are the encoding itself, only spaced out for reading.
    compact = json.dumps(json.loads(assignment_example), separators=(",", ":"), sort_keys=True).encode()
    assert encode_assignment(decode_assignment(assignment_example.encode())) == compact


@settings(max_examples=100)
@given(subscriptions)
def test_a_subscription_survives_a_round_trip(subscription):
    encoded = encode_subscription(subscription)

    assert decode_subscription(encoded) == subscription
    assert encode_subscription(decode_subscription(encoded)) == encoded


@settings(max_examples=100)
@given(assignments)
def test_an_assignment_survives_a_round_trip(assignment):
    encoded = encode_assignment(assignment)

    assert decode_assignment(encoded) == assignment
    assert encode_assignment(decode_assignment(encoded)) == encoded


@settings(max_examples=100)
@given(assignments)
def test_the_bytes_are_compact_json_with_sorted_keys(assignment):
    encoded = encode_assignment(assignment)

    assert encoded == json.dumps(json.loads(encoded), separators=(",", ":"), sort_keys=True, ensure_ascii=False).encode(
        "utf-8"
    )


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=5), children, max_size=3),
    max_leaves=10,
)
near_miss_documents = st.fixed_dictionaries(
    {},
    optional={
        "version": json_values,
        "topics": json_values,
        "owned_partitions": json_values,
        "partitions": json_values,
        "user_data": json_values,
    },
).map(lambda document: json.dumps(document).encode())


@settings(max_examples=100)
@given(st.binary(max_size=40) | near_miss_documents)
def test_decoding_any_bytes_gives_a_value_or_an_encoding_error_never_another_exception(data):
    for decode in (decode_subscription, decode_assignment):
        with contextlib.suppress(EncodingError):
            decode(data)
