"""``berth-operator``'s command line and environment, parsed into one frozen :class:`OperatorOptions`.

Owns every flag, its default and what makes it invalid. Rules:

- A bad flag or value raises :class:`OptionsError` with one line naming it; ``main`` prints it and exits 2.
- Every flag may come from the environment as ``BERTH_<FLAG>`` (``--coordinator-url`` as ``BERTH_COORDINATOR_URL``,
  ``--metrics-port`` as ``BERTH_METRICS_PORT``), the convention both daemons share (``berth.coordinator.daemon``):
  a flag beats its variable. Older names stay: ``BERTH_TRUSTED_COORDINATORS`` and ``BERTH_CA_FILE`` for
  ``--trusted-coordinator`` and ``--coordinator-ca-file``; ``BERTH_TOKEN`` holds the admin token itself, read
  when no token file is named.
- The admin token is read here, once, and kept out of ``repr`` and every description: it is never logged.
- The operator's own namespace (where the advice ConfigMap lives) comes from ``POD_NAMESPACE`` or, in a pod, the
  service-account namespace file.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import NoReturn

from berth.coordinator.client.errors import ConfigError
from berth.coordinator.client.tls import verifying_context
from berth.coordinator.daemon.environment import EnvironmentValueError, apply_environment
from berth.coordinator.daemon.logs import add_logging_flags
from berth.operator.adapters.leadership.leader_options import (
    LeaderElection,
    LeaderOptionsError,
    add_leader_election_arguments,
    parse_leader_election,
)
from berth.operator.command.cli import HelpFormatter, add_version
from berth.operator.planners.endpoints import (
    EndpointError,
    bootstrap_text,
    parse_bootstrap_servers,
    parse_coordinator_url,
)
from berth.operator.planners.ownership import AdoptionPolicy, parse_adoption_rule
from berth.operator.spec.fleet import (
    SASL_MECHANISMS,
    SESSION_MS_RANGE,
    KafkaDefaults,
    OperatorDefaults,
    SecurityProtocol,
)

SERVICE_ACCOUNT_NAMESPACE_FILE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
DEFAULT_SESSION_MIN_MS = 6_000
DEFAULT_SESSION_MAX_MS = 1_800_000
DEFAULT_RECONCILE_INTERVAL_S = 10.0
DEFAULT_RESYNC_INTERVAL_S = 600.0
#: Fleets rolling at once (``planners.roll_pacing``): on two saturated cores fifty rolls put a pod's restart gap
#: near 10 s, inside the Auto session timeout's 22.5 s.
DEFAULT_MAX_CONCURRENT_ROLLS = 50
NAMESPACE_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")


class OptionsError(ValueError):
    """A flag or environment variable the operator cannot start with."""


@dataclass(frozen=True)
class OperatorOptions:
    namespace: str | None  # None: every namespace
    coordinator_url: str | None  # the default for fleets without spec.coordinator.url
    admin_token: str | None = field(repr=False)
    token_source: str  # where the token came from, for the start-up log ("none", "BERTH_TOKEN", "file PATH")
    session_min_ms: int
    session_max_ms: int
    advice_configmap: str | None
    advice_file: Path | None
    operator_namespace: str | None  # where --advice-configmap lives
    liveness_port: int  # 0: no liveness endpoint
    log_format: str
    reconcile_interval_s: float
    log_level: str = "info"
    kafka: KafkaDefaults | None = None  # the default Kafka connection
    kafka_trusted: tuple[str, ...] = ()  # other trusted clusters' bootstrap lists, canonical
    #: Other Berth coordinators fleets may name (--trusted-coordinator), besides the default; as configured.
    trusted_coordinators: tuple[str, ...] = ()
    #: Seconds a departing pod may stay Terminating past its grace period before its id leaves anyway.
    stuck_terminating_s: float = 120.0
    stuck_group_s: float = 300.0
    #: At most this many fleets roll at once: a changed pod template waits for its turn (0: no limit).
    max_concurrent_rolls: int = DEFAULT_MAX_CONCURRENT_ROLLS
    #: Follow each Berth coordinator's journal, so status follows a group within ~1 s (else: the timer's pace).
    follow_journal: bool = True
    max_replicas: int = 1_000  # the largest spec.replicas acted on
    metrics_port: int = 8081  # GET /metrics; 0: off
    heartbeat_interval_ms: int = 3_000  # the members' preferred heartbeat (at most a third of the session timeout)
    evidence_dir: Path | None = None  # where the Kafka evidence journal is kept (a folder)
    evidence_configmap: str | None = None  # or a ConfigMap in the operator's own namespace
    #: The CA https coordinators are verified against (--coordinator-ca-file, env BERTH_CA_FILE); None: the system's.
    coordinator_ca_file: Path | None = None
    #: Every fleet is passed at least this often, whatever changes (--resync-interval-s).
    resync_interval_s: float = DEFAULT_RESYNC_INTERVAL_S
    #: The Lease replicas elect a leader on (--leader-elect); None: this process acts alone.
    leader_election: LeaderElection | None = None
    #: Which groups in use fleets may take over (--adopt-groups): the administrator's decision.
    adoption: AdoptionPolicy = field(default_factory=AdoptionPolicy)
    #: Where the operator keeps its owner records of Kafka groups (--group-owners-namespace, else its own namespace).
    group_owners_namespace: str | None = None
    max_fleets: int = 2_000  # the most fleets served (--max-fleets; 0: no bound)
    max_fleets_per_namespace: int = 500  # and per namespace (--max-fleets-per-namespace)

    @property
    def defaults(self) -> OperatorDefaults:
        return OperatorDefaults(
            coordinator_url=self.coordinator_url,
            kafka=self.kafka,
            kafka_trusted=self.kafka_trusted,
            coordinators_trusted=self.trusted_coordinators,
            max_replicas=self.max_replicas,
            preferred_heartbeat_interval_ms=self.heartbeat_interval_ms,
            max_fleets=self.max_fleets,
            max_fleets_per_namespace=self.max_fleets_per_namespace,
        )

    def describe(self) -> list[str]:
        """What the operator runs with, for the start-up log (never the token itself)."""
        where = f"namespace {self.namespace}" if self.namespace else "all namespaces"
        advice = [
            *([f"ConfigMap {self.operator_namespace}/{self.advice_configmap}"] if self.advice_configmap else []),
            *([f"file {self.advice_file}"] if self.advice_file else []),
        ]
        return [
            f"watching ConsumerFleets (consumerfleets.berth.dev/v1alpha1) in {where}",
            f"default coordinator: {self.coordinator_url or 'none (every fleet must set spec.coordinator.url)'}",
            f"other coordinators fleets may name: {', '.join(self.trusted_coordinators) or 'none'}"
            " (the admin token goes to no other)",
            f"coordinator admin token: {self.token_source}",
            "https coordinators verified against: "
            + (f"CA file {self.coordinator_ca_file}" if self.coordinator_ca_file else "the system's CAs"),
            "default Kafka connection: "
            + (
                f"{self.kafka.bootstrap_servers} ({self.kafka.security_protocol.value}"
                + (f", SASL {self.kafka.sasl_mechanism}" if self.kafka.sasl_mechanism else "")
                + ")"
                if self.kafka
                else "none"
            ),
            f"trusted Kafka clusters besides it: {'; '.join(self.kafka_trusted) or 'none'}",
            "Kafka evidence journal: "
            + (
                f"ConfigMap {self.operator_namespace}/{self.evidence_configmap}"
                if self.evidence_configmap
                else str(self.evidence_dir or "off")
            ),
            f"computed session timeouts kept within {self.session_min_ms}..{self.session_max_ms} ms",
            f"groups in use fleets may adopt (--adopt-groups): {self.adoption.describe()}",
            "owner records of Kafka groups: "
            + (
                f"Leases in namespace {self.group_owners_namespace}"
                if self.group_owners_namespace
                else "none (Kafka fleets are refused: set --group-owners-namespace or POD_NAMESPACE)"
            ),
            "fleets served: at most "
            + (f"{self.max_fleets}" if self.max_fleets else "any number")
            + (f", {self.max_fleets_per_namespace} per namespace" if self.max_fleets_per_namespace else ""),
            f"session-timeout advice: {', '.join(advice) if advice else 'none (estimates from pod templates only)'}",
            f"liveness endpoint: {f'port {self.liveness_port} /healthz' if self.liveness_port else 'off'}",
            f"metrics: {f'port {self.metrics_port} /metrics' if self.metrics_port else 'off'}",
            f"fleets pass on change; resync every {self.resync_interval_s:g} s; fleets whose group is not followed"
            f" (Kafka), refused ones and retries every {self.reconcile_interval_s:g} s; logs: {self.log_format},"
            f" {self.log_level}",
            self.leader_election.describe() if self.leader_election else "leader election: off (one replica acts)",
            "status follows each coordinator's journal"
            + (" (one long-poll per coordinator)" if self.follow_journal else ": off (--no-follow-journal)"),
        ]


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        # One line, no usage block: the caller prints "berth-operator: <message>" and exits 2.
        raise OptionsError(message)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="berth-operator",
        description="The Kubernetes operator for ConsumerFleets (Kopf; several replicas need --leader-elect).",
        formatter_class=HelpFormatter,
    )
    add_version(parser)
    parser.add_argument("--namespace", help="serve fleets in this namespace only (default: every namespace)")
    parser.add_argument("--coordinator-url", help="default coordinator URL")
    parser.add_argument(
        "--coordinator-ca-file",
        type=Path,
        metavar="PEM",
        help="verify https coordinators against the CA certificate(s) in this file (also env BERTH_CA_FILE; default:"
        " the system's CAs); it is also published to fleets on https coordinators, as BERTH_CA_FILE in their pods",
    )
    parser.add_argument(
        "--trusted-coordinator",
        action="append",
        default=[],
        metavar="URL",
        help="another Berth coordinator fleets may name in spec.coordinator.url (repeatable; in the environment"
        " separated by ','); the admin token is sent to these and the default only",
    )
    parser.add_argument(
        "--token-file", type=Path, help="file holding the coordinator admin token (else the token in BERTH_TOKEN)"
    )
    parser.add_argument(
        "--session-min-ms",
        type=int,
        default=DEFAULT_SESSION_MIN_MS,
        help="lower bound for the session timeouts the operator computes (policy Auto)",
    )
    parser.add_argument(
        "--session-max-ms",
        type=int,
        default=DEFAULT_SESSION_MAX_MS,
        help="upper bound for the session timeouts the operator computes (30 minutes is KIP-345's cap)",
    )
    parser.add_argument("--advice-configmap", help="ConfigMap (key advice.json) in the operator's own namespace")
    parser.add_argument("--advice-file", type=Path, help="an advice.json written by berth-analyze")
    parser.add_argument("--liveness-port", type=int, default=8080, help="GET /healthz on this port; 0 turns it off")
    add_logging_flags(parser)
    parser.add_argument(
        "--reconcile-interval-s",
        type=float,
        default=DEFAULT_RECONCILE_INTERVAL_S,
        help="how often a fleet is passed again when no change would announce it: its status where its group's"
        " journal is not followed (Kafka, --no-follow-journal), a refused fleet, a wait's backstop (default 10)",
    )
    parser.add_argument(
        "--resync-interval-s",
        type=float,
        default=DEFAULT_RESYNC_INTERVAL_S,
        help="every fleet is passed at least this often, whatever changes (a safety net for what no watch sees;"
        " default 600)",
    )
    parser.add_argument(
        "--stuck-terminating-s",
        type=float,
        default=120.0,
        help="how long past its grace period a departing pod stuck Terminating holds its batch leave; then it leaves"
        " anyway, with a Warning Event (default 120)",
    )
    parser.add_argument(
        "--max-concurrent-rolls",
        type=int,
        default=DEFAULT_MAX_CONCURRENT_ROLLS,
        help="at most this many fleets roll their pods at once: a fleet whose pod template changed waits for its turn"
        " (TemplateApplied=False, RollQueued), so a change that rolls every fleet keeps each pod's restart gap that"
        f" of one restart; 0: no limit (default {DEFAULT_MAX_CONCURRENT_ROLLS})",
    )
    parser.add_argument(
        "--stuck-group-s",
        type=float,
        default=300.0,
        help="how long partitions of a fleet's group may have no owner, or Ready pods own nothing while another member"
        " owns several, before the fleet's GroupStuck condition is True, with a Warning Event (default 300)",
    )
    parser.add_argument(
        "--follow-journal",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="follow each Berth coordinator's journal (one long-poll per coordinator) so status follows a group"
        " within about a second; --no-follow-journal leaves it to the reconcile interval (default: on)",
    )
    parser.add_argument(
        "--max-replicas",
        type=int,
        default=1_000,
        help="the largest spec.replicas the operator acts on; a fleet asking for more is refused (default 1000; the"
        " CRD allows at most 10000)",
    )
    parser.add_argument(
        "--max-fleets",
        type=int,
        default=2_000,
        help="the most fleets the operator serves; the newest beyond it are refused with reason TooManyFleets"
        " (default 2000; 0: no bound)",
    )
    parser.add_argument(
        "--max-fleets-per-namespace",
        type=int,
        default=500,
        help="the most fleets the operator serves in one namespace (default 500; 0: no bound)",
    )
    parser.add_argument(
        "--adopt-groups",
        action="append",
        default=[],
        metavar="NAMESPACE=GLOB[,GLOB]",
        help="fleets in NAMESPACE may take over a group in use by consumers no fleet owns when its id matches a GLOB"
        " (repeatable; env BERTH_ADOPT_GROUPS, entries separated by ';'): the administrator's decision, which no"
        " spec field can make",
    )
    parser.add_argument(
        "--group-owners-namespace",
        metavar="NAMESPACE",
        help="keep the owner records of Kafka groups (one Lease per group) in this namespace (default: the"
        " operator's own); operators sharing a Kafka cluster share one",
    )
    parser.add_argument(
        "--metrics-port",
        type=int,
        default=8081,
        help="Prometheus metrics (GET /metrics, berth_operator_*) on this port; 0 turns them off (default 8081)",
    )
    parser.add_argument(
        "--heartbeat-interval-ms",
        type=int,
        default=3_000,
        help="the members' heartbeat interval (BERTH_HEARTBEAT_INTERVAL_MS), at most a third of the session timeout",
    )
    add_leader_election_arguments(parser)
    kafka = parser.add_argument_group("Kafka")
    kafka.add_argument("--kafka-bootstrap-servers", help="the default Kafka connection")
    kafka.add_argument(
        "--kafka-security-protocol",
        choices=[p.value for p in SecurityProtocol],
        help="of the default connection (default PLAINTEXT)",
    )
    kafka.add_argument(
        "--kafka-sasl-mechanism", choices=SASL_MECHANISMS, help="of the default connection (SASL_* protocols)"
    )
    kafka.add_argument(
        "--kafka-trusted-bootstrap",
        action="append",
        default=[],
        metavar="LIST",
        help="another Kafka cluster fleets may name, as its bootstrap list (repeatable; in the environment, lists"
        " separated by ';')",
    )
    kafka.add_argument(
        "--evidence-dir",
        type=Path,
        help="keep the Kafka evidence journal (what the operator observes per instance id) in this directory",
    )
    kafka.add_argument(
        "--evidence-configmap",
        metavar="NAME",
        help="keep the Kafka evidence journal in this ConfigMap (key evidence.jsonl) in the operator's namespace",
    )
    return parser


def parse_options(
    argv: Sequence[str],
    environ: Mapping[str, str],
    *,
    service_account_namespace_file: Path = SERVICE_ACCOUNT_NAMESPACE_FILE,
) -> OperatorOptions:
    parser = build_parser()
    try:
        apply_environment(
            parser,
            environ,
            separators={"--kafka-trusted-bootstrap": ";", "--adopt-groups": ";"},
            aliases={"--trusted-coordinator": "BERTH_TRUSTED_COORDINATORS", "--coordinator-ca-file": "BERTH_CA_FILE"},
        )
    except EnvironmentValueError as error:
        raise OptionsError(str(error)) from None
    args = parser.parse_args(list(argv))
    coordinator_url = args.coordinator_url or None
    if coordinator_url is not None:
        _check_url("--coordinator-url", coordinator_url)
    trusted_coordinators = list(args.trusted_coordinator)
    for url in trusted_coordinators:
        _check_url("--trusted-coordinator", url)
    token, token_source = _admin_token(args.token_file, environ)
    ca_file = args.coordinator_ca_file
    if ca_file is not None:
        try:
            verifying_context(str(ca_file), source="--coordinator-ca-file")
        except ConfigError as error:
            raise OptionsError(str(error)) from None
    low, high = SESSION_MS_RANGE
    for flag, value in (("--session-min-ms", args.session_min_ms), ("--session-max-ms", args.session_max_ms)):
        if not low <= value <= high:
            raise OptionsError(f"{flag}: {value} is outside {low}..{high}")
    if args.session_min_ms > args.session_max_ms:
        raise OptionsError(f"--session-min-ms {args.session_min_ms} is above --session-max-ms {args.session_max_ms}")
    if not 0 <= args.metrics_port <= 65535:
        raise OptionsError(f"--metrics-port: {args.metrics_port} is not a port number (0 turns it off)")
    if not 0 <= args.liveness_port <= 65535:
        raise OptionsError(f"--liveness-port: {args.liveness_port} is not a port number (0 turns it off)")
    # Timers below a tenth of a second would keep the API server busy for nothing.
    if not args.reconcile_interval_s >= 0.1:
        raise OptionsError(f"--reconcile-interval-s: {args.reconcile_interval_s} is below 0.1")
    if not 1 <= args.resync_interval_s <= 86_400:
        raise OptionsError(f"--resync-interval-s: {args.resync_interval_s} is outside 1..86400")
    if not 1 <= args.max_replicas <= 10_000:
        raise OptionsError(f"--max-replicas: {args.max_replicas} is outside 1..10000 (the CRD's maximum)")
    if not 0 <= args.stuck_terminating_s <= 86_400:
        raise OptionsError(f"--stuck-terminating-s: {args.stuck_terminating_s} is outside 0..86400")
    if not 0 <= args.max_concurrent_rolls <= 100_000:
        raise OptionsError(f"--max-concurrent-rolls: {args.max_concurrent_rolls} is outside 0..100000")
    if not 1 <= args.stuck_group_s <= 86_400:
        raise OptionsError(f"--stuck-group-s: {args.stuck_group_s} is outside 1..86400")
    if args.namespace is not None and not args.namespace:
        raise OptionsError("--namespace: must not be empty")
    operator_namespace = _own_namespace(environ, service_account_namespace_file)
    if args.advice_configmap and operator_namespace is None:
        raise OptionsError("--advice-configmap: the operator's namespace is unknown (set POD_NAMESPACE outside a pod)")
    if not 100 <= args.heartbeat_interval_ms <= 60_000:
        raise OptionsError(f"--heartbeat-interval-ms: {args.heartbeat_interval_ms} is outside 100..60000")
    kafka, trusted = _kafka_options(args)
    try:
        leader_election = parse_leader_election(args, environ, operator_namespace)
    except LeaderOptionsError as error:
        raise OptionsError(str(error)) from None
    bounds = (("--max-fleets", args.max_fleets), ("--max-fleets-per-namespace", args.max_fleets_per_namespace))
    for flag, value in bounds:
        if not 0 <= value <= 1_000_000:
            raise OptionsError(f"{flag}: {value} is outside 0..1000000 (0: no bound)")
    try:
        adoption = AdoptionPolicy(tuple(parse_adoption_rule(text) for text in args.adopt_groups))
    except ValueError as error:
        raise OptionsError(f"--adopt-groups: {error}") from None
    if args.group_owners_namespace is not None and not NAMESPACE_NAME.fullmatch(args.group_owners_namespace):
        raise OptionsError(f"--group-owners-namespace: {args.group_owners_namespace!r} is not a namespace name")
    if args.evidence_configmap and operator_namespace is None:
        raise OptionsError(
            "--evidence-configmap: the operator's namespace is unknown (set POD_NAMESPACE outside a pod)"
        )
    return OperatorOptions(
        kafka=kafka,
        kafka_trusted=trusted,
        trusted_coordinators=tuple(trusted_coordinators),
        coordinator_ca_file=ca_file,
        adoption=adoption,
        group_owners_namespace=args.group_owners_namespace or operator_namespace,
        max_fleets=args.max_fleets,
        max_fleets_per_namespace=args.max_fleets_per_namespace,
        stuck_terminating_s=args.stuck_terminating_s,
        stuck_group_s=args.stuck_group_s,
        max_concurrent_rolls=args.max_concurrent_rolls,
        follow_journal=args.follow_journal,
        max_replicas=args.max_replicas,
        metrics_port=args.metrics_port,
        heartbeat_interval_ms=args.heartbeat_interval_ms,
        evidence_dir=args.evidence_dir,
        namespace=args.namespace,
        coordinator_url=coordinator_url,
        admin_token=token,
        token_source=token_source,
        session_min_ms=args.session_min_ms,
        session_max_ms=args.session_max_ms,
        advice_configmap=args.advice_configmap or None,
        advice_file=args.advice_file,
        operator_namespace=operator_namespace,
        liveness_port=args.liveness_port,
        log_format=args.log_format,
        log_level=args.log_level,
        reconcile_interval_s=args.reconcile_interval_s,
        resync_interval_s=args.resync_interval_s,
        leader_election=leader_election,
    )


def _kafka_options(args: argparse.Namespace) -> tuple[KafkaDefaults | None, tuple[str, ...]]:
    text = args.kafka_bootstrap_servers or None
    protocol_text = args.kafka_security_protocol or "PLAINTEXT"
    try:
        protocol = SecurityProtocol(protocol_text)
    except ValueError:
        raise OptionsError(f"--kafka-security-protocol: {protocol_text!r} is not a security protocol") from None
    mechanism = args.kafka_sasl_mechanism or None
    if mechanism is not None and mechanism not in SASL_MECHANISMS:
        raise OptionsError(f"--kafka-sasl-mechanism: {mechanism!r} is not one of {', '.join(SASL_MECHANISMS)}")
    kafka = None
    if text:
        try:
            canonical = bootstrap_text(parse_bootstrap_servers(text))
        except EndpointError as error:
            raise OptionsError(f"--kafka-bootstrap-servers: {error}") from None
        kafka = KafkaDefaults(canonical, protocol, mechanism if protocol.uses_sasl else None)
    trusted_texts = [item for item in args.kafka_trusted_bootstrap if item.strip()]
    trusted = []
    for item in trusted_texts:
        try:
            trusted.append(bootstrap_text(parse_bootstrap_servers(item)))
        except EndpointError as error:
            raise OptionsError(f"--kafka-trusted-bootstrap: {error}") from None
    return kafka, tuple(trusted)


def _check_url(flag: str, url: str) -> None:
    try:
        parse_coordinator_url(url)
    except EndpointError as error:
        raise OptionsError(f"{flag}: {error}") from None


def _admin_token(token_file: Path | None, environ: Mapping[str, str]) -> tuple[str | None, str]:
    if token_file is not None:
        try:
            token = token_file.read_text().strip()
        except OSError as error:
            raise OptionsError(f"--token-file: cannot read {token_file}: {error.strerror}") from None
        if not token:
            raise OptionsError(f"--token-file: {token_file} is empty")
        return token, f"from file {token_file}"
    token = environ.get("BERTH_TOKEN", "").strip()
    return (token, "from BERTH_TOKEN") if token else (None, "none (the coordinator must not require one)")


def _own_namespace(environ: Mapping[str, str], service_account_file: Path) -> str | None:
    if environ.get("POD_NAMESPACE"):
        return environ["POD_NAMESPACE"]
    try:
        return service_account_file.read_text().strip() or None
    except OSError:
        return None
