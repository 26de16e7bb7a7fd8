"""``berth-operator``'s leader-election flags: whether replicas elect a leader, on which Lease, with which timings.

Rules (``options`` for the rest): off by default on the command line (one process, nothing to elect), on in the
chart (two replicas); the Lease lives in the operator's own namespace unless ``--leader-election-namespace`` says
otherwise; timings are checked by ``planners.lease.check_timing`` (retry period < renew deadline < lease
duration); a replica's identity is its pod's name (``POD_NAME``, else ``HOSTNAME``) and a random suffix, so a
restarted pod is a new candidate and never mistakes an old holder's Lease for its own.
"""

from __future__ import annotations

import argparse
import socket
import uuid
from collections.abc import Mapping
from dataclasses import dataclass

from berth.operator.planners.lease import LeaseTiming, LeaseTimingError, check_timing

DEFAULT_LEASE = "berth-operator"


class LeaderOptionsError(ValueError):
    """A leader-election flag the operator cannot start with."""


@dataclass(frozen=True)
class LeaderElection:
    namespace: str
    lease: str
    identity: str
    timing: LeaseTiming

    def describe(self) -> str:
        t = self.timing
        return (
            f"leader election: Lease {self.namespace}/{self.lease} as {self.identity} (lease {t.lease_duration_s:g} s,"
            f" renew deadline {t.renew_deadline_s:g} s, retry {t.retry_period_s:g} s)"
        )


def add_leader_election_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("leader election (several replicas, one acting)")
    group.add_argument(
        "--leader-elect",
        action=argparse.BooleanOptionalAction,
        default=False,
        help="wait for a coordination.k8s.io Lease and act only while holding it, so several replicas can run with"
        " one acting (default: off; the chart turns it on)",
    )
    group.add_argument("--leader-election-lease", default=DEFAULT_LEASE, metavar="NAME", help="the Lease's name")
    group.add_argument(
        "--leader-election-namespace",
        metavar="NAMESPACE",
        help="the Lease's namespace (default: the operator's own, POD_NAMESPACE or the service account's)",
    )
    defaults = LeaseTiming()
    group.add_argument(
        "--leader-elect-lease-duration-s",
        type=float,
        default=defaults.lease_duration_s,
        help="how long a standby waits after the leader's last renewal before it takes over",
    )
    group.add_argument(
        "--leader-elect-renew-deadline-s",
        type=float,
        default=defaults.renew_deadline_s,
        help="how long the leader goes on acting without a successful renewal (shorter than the lease duration)",
    )
    group.add_argument(
        "--leader-elect-retry-period-s",
        type=float,
        default=defaults.retry_period_s,
        help="how often the leader renews and a standby looks",
    )


def parse_leader_election(
    args: argparse.Namespace, environ: Mapping[str, str], operator_namespace: str | None
) -> LeaderElection | None:
    if not args.leader_elect:
        return None
    timing = LeaseTiming(
        lease_duration_s=args.leader_elect_lease_duration_s,
        renew_deadline_s=args.leader_elect_renew_deadline_s,
        retry_period_s=args.leader_elect_retry_period_s,
    )
    try:
        check_timing(timing)
    except LeaseTimingError as error:
        raise LeaderOptionsError(f"--leader-elect: {error}") from None
    namespace = args.leader_election_namespace or operator_namespace
    if not namespace:
        raise LeaderOptionsError(
            "--leader-elect: the Lease's namespace is unknown (set --leader-election-namespace or POD_NAMESPACE)"
        )
    if not args.leader_election_lease:
        raise LeaderOptionsError("--leader-election-lease: must not be empty")
    pod = environ.get("POD_NAME") or environ.get("HOSTNAME") or socket.gethostname()
    return LeaderElection(namespace, args.leader_election_lease, f"{pod}_{uuid.uuid4().hex[:8]}", timing)
