"""The protocol vote is kept as members come, go and change protocols (so a static restart does not recount a
group of 10,000); whatever the sequence, it selects what a full recount selects (Kafka's ``selectProtocol``)."""

from __future__ import annotations

from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as st

from berth.coordinator.core.group import Group
from berth.coordinator.core.member import Member
from berth.coordinator.protocol import JoinProtocol

NAMES = ("range", "roundrobin", "sticky")

protocol_lists = st.lists(st.sampled_from(NAMES), min_size=1, max_size=3, unique=True).map(
    lambda names: tuple(JoinProtocol(n, n.encode()) for n in names)
)
operations = st.lists(
    st.one_of(
        st.tuples(st.just("add"), protocol_lists),
        st.tuples(st.just("remove"), st.integers(0, 20)),
        st.tuples(st.just("update"), st.integers(0, 20), protocol_lists),
        st.tuples(st.just("replace"), st.integers(0, 20)),
        st.tuples(st.just("select")),
    ),
    max_size=60,
)


def recounted(group: Group) -> str | None:
    """Kafka's selectProtocol, from scratch: most first-preference votes among the common protocols."""
    candidates = group.candidate_protocols()
    if not group.members or not candidates:
        return None
    votes = Counter(next(p.name for p in m.protocols if p.name in candidates) for m in group.members.values())
    return min(votes, key=lambda name: (-votes[name], name))


@settings(max_examples=300, deadline=None)
@given(operations)
def test_the_kept_vote_selects_what_a_recount_selects(ops: list[tuple]) -> None:
    group = Group("g", 0)
    serial = 0
    for op in ops:
        ids = sorted(group.members)
        if op[0] == "add":
            serial += 1
            group.add(Member(f"m-{serial}", f"i-{serial}", "c", "h", 1, 1, "consumer", op[1]))
        elif op[0] == "remove" and ids:
            group.remove(ids[op[1] % len(ids)])
        elif op[0] == "update" and ids:
            member = group.members[ids[op[1] % len(ids)]]
            group.update_member(member, op[2], 1, 1, None)
        elif op[0] == "replace" and ids:
            old = group.members[ids[op[1] % len(ids)]]
            serial += 1
            assert old.group_instance_id is not None
            group.replace_static_member(old.group_instance_id, old.member_id, f"m-{serial}")
        expected = recounted(group)
        if expected is not None and (op[0] == "select" or serial % 3 == 0):
            assert group.select_protocol() == expected
    expected = recounted(group)
    if expected is not None:
        assert group.select_protocol() == expected
