"""The histories the signal lab plays, as a Hypothesis strategy shared by every rig (Berth's coordinator, Kafka).

A history (``signal_lab.History``) is a fleet's settings — ``leaveOnScaleDown``, ``preRegister``, OrderedReady or
Parallel, its first size — and an interleaving of steps: operator passes, time passing, pod deletes, evictions
(a drain, under the fleet's budget), crashes short and long, rolls (some with a new subscription), scale-ups and
downs. Durations are in the lab's ms, against its session timeout (``signal_lab.SESSION_MS``): a 500 ms crash is a
static restart, a 15 s one outlasts the session.
"""

from __future__ import annotations

from hypothesis import strategies as st
from support.signal_lab import History, Step

MAX_REPLICAS = 5

steps = st.one_of(
    st.just(Step("pass")),
    st.just(Step("pass")),
    st.sampled_from((300, 1_000, 3_000, 8_000, 20_000)).map(lambda ms: Step("wait", ms=ms)),
    st.sampled_from((1_000, 3_000)).map(lambda ms: Step("wait", ms=ms)),
    st.integers(0, MAX_REPLICAS - 1).map(lambda n: Step("delete", n)),
    st.integers(0, MAX_REPLICAS - 1).map(lambda n: Step("evict", n)),
    st.tuples(st.integers(0, MAX_REPLICAS - 1), st.sampled_from((500, 4_000, 15_000))).map(
        lambda t: Step("crash", t[0], ms=t[1])
    ),
    st.booleans().map(lambda changed: Step("roll", changed=changed)),
    st.integers(0, MAX_REPLICAS).map(lambda n: Step("scale", n)),
)
histories = st.builds(
    History,
    replicas=st.integers(1, MAX_REPLICAS - 1),
    leave_on_scale_down=st.booleans(),
    pre_register=st.booleans(),
    ordered_ready=st.booleans(),
    steps=st.lists(steps, min_size=4, max_size=16).map(tuple),
)
