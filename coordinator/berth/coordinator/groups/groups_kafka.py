"""``berth-groups --bootstrap-server HOST:PORT``: a Kafka cluster's groups, read the way ``kafka-consumer-groups.sh``
reads them — ``list``, and ``describe`` with its views: per partition (the default: CURRENT-OFFSET, LOG-END-OFFSET,
LAG and the member holding it), ``--members`` and ``--state`` — classic and KIP-848 consumer-protocol groups alike
(``kafka_groups``). ``--command-config FILE`` takes the client properties ``kafka-consumer-groups.sh`` takes for a
secured cluster (``security.protocol``, ``sasl.mechanism``, ``sasl.jaas.config`` or ``sasl.username`` and
``sasl.password``, ``ssl.ca.location``, ``ssl.certificate.location``, ``ssl.key.location``).

Rules: read-only (changing a Kafka group is Kafka's tools' or the operator's job); blocking kafka-python calls run in
a worker thread; what the cluster sent (group, member, client ids, hosts, topics) is shown escaped
(``groups_render.shown``); a group the cluster does not know is an error naming it, after what was found is printed;
secrets from the properties file are never printed.
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from berth.coordinator.client import kafka_groups
from berth.coordinator.client.kafka_groups import KafkaGroup, PartitionLag
from berth.coordinator.groups import groups_render as render
from berth.coordinator.groups.groups_exit import ExitCode
from berth.coordinator.protocol.jaas import jaas_value

#: The properties --command-config understands (Java's and librdkafka's spellings).
PROPERTIES = (
    "security.protocol",
    "sasl.mechanism",
    "sasl.jaas.config",
    "sasl.username",
    "sasl.password",
    "ssl.ca.location",
    "ssl.certificate.location",
    "ssl.key.location",
)


class KafkaCliError(Exception):
    """A failure to report as one line, with its exit status: ``USAGE`` for a ``--command-config`` that is wrong,
    ``UNAVAILABLE`` for a cluster that could not answer (``groups_exit``)."""

    def __init__(self, message: str, code: ExitCode = ExitCode.USAGE) -> None:
        super().__init__(message)
        self.code = code


def read_properties(path: str) -> dict[str, str]:
    """A Java properties file (``key=value`` or ``key: value``, ``#`` and ``!`` comments); unknown keys refused."""
    try:
        text = Path(path).read_text()
    except OSError as error:
        raise KafkaCliError(f"--command-config {path}: {error.strerror or error}") from None
    found: dict[str, str] = {}
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line[0] in "#!":
            continue
        separator = min((i for i in (line.find("="), line.find(":")) if i >= 0), default=-1)
        if separator < 0:
            raise KafkaCliError(f"--command-config {path}, line {number}: expected key=value")
        key, value = line[:separator].strip(), line[separator + 1 :].strip()
        if key not in PROPERTIES:
            raise KafkaCliError(
                f"--command-config {path}, line {number}: {key!r} is not one of {', '.join(PROPERTIES)}"
            )
        found[key] = value
    return found


async def run(args: Any, as_json: bool) -> tuple[str, str | None]:
    """The command's output and the error to report after it (None: none)."""
    properties = read_properties(args.command_config) if args.command_config else {}
    settings = admin_settings(args.bootstrap_server, properties, args.timeout)
    return await asyncio.to_thread(_run, args, settings, as_json)


def admin_settings(bootstrap: str, properties: Mapping[str, str], timeout_s: float) -> dict[str, Any]:
    """kafka-python's KafkaAdminClient settings for ``--bootstrap-server`` and the ``--command-config`` properties."""
    settings: dict[str, Any] = {
        "bootstrap_servers": [b.strip() for b in bootstrap.split(",") if b.strip()],
        "client_id": "berth-groups",
        # Both bounded by --timeout: kafka-python waits 30 s to bootstrap by default (an unreachable cluster hung
        # the command that long), then each request its own timeout.
        "request_timeout_ms": int(timeout_s * 1000),
        "bootstrap_timeout_ms": int(timeout_s * 1000),
        "security_protocol": properties.get("security.protocol", "PLAINTEXT"),
    }
    if properties.get("sasl.mechanism"):
        username, password = properties.get("sasl.username"), properties.get("sasl.password")
        jaas = properties.get("sasl.jaas.config", "")
        username = username or jaas_value(jaas, "username")
        password = password or jaas_value(jaas, "password")
        if not username or password is None:
            raise KafkaCliError(
                "--command-config: sasl.mechanism needs sasl.username/sasl.password or sasl.jaas.config"
            )
        settings |= {
            "sasl_mechanism": properties["sasl.mechanism"],
            "sasl_plain_username": username,
            "sasl_plain_password": password,
        }
    if settings["security_protocol"].endswith("SSL"):
        context = ssl.create_default_context(cafile=properties.get("ssl.ca.location") or None)
        if properties.get("ssl.certificate.location"):
            context.load_cert_chain(properties["ssl.certificate.location"], properties.get("ssl.key.location"))
        settings["ssl_context"] = context
    return settings


def _run(args: Any, settings: dict[str, Any], as_json: bool) -> tuple[str, str | None]:
    from kafka.admin import KafkaAdminClient
    from kafka.errors import KafkaError

    try:
        admin = KafkaAdminClient(**settings)
    except KafkaError as error:
        raise KafkaCliError(
            f"cannot reach the Kafka cluster at {args.bootstrap_server}: {_text(error)}", ExitCode.UNAVAILABLE
        ) from None
    try:
        if args.command == "list":
            groups = kafka_groups.list_groups(admin)
            if as_json:
                listed = [{"group_id": g, "protocol": p, "state": s} for g, p, s in groups]
                return render.to_json({"groups": listed}), None
            rows = [[render.shown(g), p or "-", s or "-"] for g, p, s in groups]
            return (render.table(["GROUP", "PROTOCOL", "STATE"], rows) if rows else "no groups"), None
        names = [g for g, _, _ in kafka_groups.list_groups(admin)] if args.all_groups else _named(args)
        found = [(name, kafka_groups.describe_group(admin, name)) for name in names]
        known = [(name, group) for name, group in found if group.exists]
        missing = [name for name, group in found if not group.exists]
        views = {name: _view(admin, group, with_lag=not (args.state or args.members)) for name, group in known}
    except KafkaError as error:
        raise KafkaCliError(
            f"the Kafka cluster at {args.bootstrap_server}: {_text(error)}", ExitCode.UNAVAILABLE
        ) from None
    finally:
        admin.close()
    absent = None if args.all_groups or not missing else f"group(s) {', '.join(map(repr, missing))} do not exist"
    if as_json:
        return render.to_json({"groups": [_json(group, views[name]) for name, group in known]}), absent
    if args.state:
        return render.table(STATE_HEADERS, [_state_row(g) for _, g in known]), absent
    if args.members:
        rows = [row for _, group in known for row in _member_rows(group)]
        return render.table(MEMBER_HEADERS, rows), absent
    return "\n\n".join(render.table(LAG_HEADERS, _lag_rows(group, views[name])) for name, group in known), absent


LAG_HEADERS = [
    "GROUP",
    "TOPIC",
    "PARTITION",
    "CURRENT-OFFSET",
    "LOG-END-OFFSET",
    "LAG",
    "CONSUMER-ID",
    "HOST",
    "CLIENT-ID",
]
MEMBER_HEADERS = ["GROUP", "CONSUMER-ID", "GROUP-INSTANCE-ID", "HOST", "CLIENT-ID", "#PARTITIONS", "EPOCH"]
STATE_HEADERS = ["GROUP", "PROTOCOL", "STATE", "EPOCH", "#MEMBERS"]


def _named(args: Any) -> list[str]:
    return list(dict.fromkeys([*args.groups, *args.group]))


def _view(admin: Any, group: KafkaGroup, *, with_lag: bool) -> tuple[PartitionLag, ...]:
    return kafka_groups.group_lag(admin, group.group_id, kafka_groups.owners_of(group)) if with_lag else ()


def _lag_rows(group: KafkaGroup, lags: Sequence[PartitionLag]) -> list[list[str]]:
    members = {member.name: member for member in group.members}
    rows = []
    for p in lags:
        member = members.get(p.owner or "")
        rows.append(
            [
                render.shown(group.group_id),
                render.shown(p.topic),
                str(p.partition),
                _number(p.committed),
                _number(p.log_end),
                _number(p.lag),
                render.shown(member.member_id) if member else "-",
                render.shown(member.client_host) if member else "-",
                render.shown(member.client_id) if member else "-",
            ]
        )
    return rows or [[render.shown(group.group_id), "-", "-", "-", "-", "-", "-", "-", "-"]]


def _member_rows(group: KafkaGroup) -> list[list[str]]:
    return [
        [
            render.shown(group.group_id),
            render.shown(m.member_id),
            render.shown(m.instance_id) if m.instance_id else "-",
            render.shown(m.client_host),
            render.shown(m.client_id),
            str(len(m.assignment)),
            _number(m.member_epoch),
        ]
        for m in group.members
    ]


def _state_row(group: KafkaGroup) -> list[str]:
    return [render.shown(group.group_id), group.protocol, group.state, _number(group.epoch), str(len(group.members))]


def _json(group: KafkaGroup, lags: Sequence[PartitionLag]) -> dict[str, Any]:
    return {
        "group_id": group.group_id,
        "protocol": group.protocol,
        "state": group.state,
        "epoch": group.epoch,
        "assignment_epoch": group.assignment_epoch,
        "members": [
            {
                "member_id": m.member_id,
                "group_instance_id": m.instance_id,
                "client_id": m.client_id,
                "client_host": m.client_host,
                "member_epoch": m.member_epoch,
                "partitions": [f"{t}:{p}" for t, p in m.assignment],
            }
            for m in group.members
        ],
        "offsets": [
            {
                "topic": p.topic,
                "partition": p.partition,
                "committed": p.committed,
                "log_end": p.log_end,
                "lag": p.lag,
                "owner": p.owner,
            }
            for p in lags
        ],
        "lag": sum(p.lag for p in lags if p.lag is not None),
    }


def _number(value: int | None) -> str:
    return "-" if value is None else str(value)


def _text(error: BaseException) -> str:
    return f"{type(error).__name__}: {error}" if str(error) else type(error).__name__
