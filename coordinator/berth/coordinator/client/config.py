"""A member's configuration: from arguments, or from the ``BERTH_*`` environment the operator injects.

Owns ``MemberConfig`` and its parsing. Rules:

- Every value is checked when the config is built; a bad one raises ``ConfigError`` naming the environment
  variable it came from (``from_env``) or the argument (direct construction).
- ``BERTH_GROUP_INSTANCE_ID`` absent means a dynamic member; present, it must be a legal Kafka
  ``group.instance.id`` (non-empty, at most 249 of ``[a-zA-Z0-9._-]``), as the Java client insists.
- Kafka members learn topics' partition counts from brokers; a Berth member is told them:
  ``BERTH_TOPICS="orders:24,payments:8"``. The assignor preference list (``BERTH_ASSIGNORS``, default
  ``sticky,range``) becomes the join's protocols, in that order.
- Defaults are Kafka's consumer defaults (session 45 s, rebalance 300 s, heartbeat 3 s, retry backoff 100 ms
  growing to 1 s), and the heartbeat interval must be below the session timeout.
- The token comes from ``BERTH_TOKEN`` or, read once at start, the file ``BERTH_TOKEN_FILE`` names (never both).
  An https coordinator is verified against ``BERTH_CA_FILE`` when set (else the system's CAs); a CA file with an
  http:// URL is refused, since the token would then travel in clear. Answers over ``BERTH_MAX_RESPONSE_BYTES``
  (16 MiB) are refused.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Final

from berth.coordinator.client.assignors import ASSIGNORS
from berth.coordinator.client.errors import ConfigError
from berth.coordinator.client.tls import ENV_CA_FILE, verifying_context
from berth.coordinator.client.transport import DEFAULT_MAX_RESPONSE_BYTES
from berth.coordinator.protocol import MAX_GROUP_ID_BYTES

ENV_GROUP_ID: Final = "BERTH_GROUP_ID"
ENV_GROUP_INSTANCE_ID: Final = "BERTH_GROUP_INSTANCE_ID"
ENV_COORDINATOR_URL: Final = "BERTH_COORDINATOR_URL"
ENV_SESSION_TIMEOUT_MS: Final = "BERTH_SESSION_TIMEOUT_MS"
ENV_REBALANCE_TIMEOUT_MS: Final = "BERTH_REBALANCE_TIMEOUT_MS"
ENV_HEARTBEAT_INTERVAL_MS: Final = "BERTH_HEARTBEAT_INTERVAL_MS"
ENV_TOKEN: Final = "BERTH_TOKEN"
ENV_TOPICS: Final = "BERTH_TOPICS"
ENV_ASSIGNORS: Final = "BERTH_ASSIGNORS"
ENV_CLIENT_ID: Final = "BERTH_CLIENT_ID"
ENV_REQUEST_TIMEOUT_MS: Final = "BERTH_REQUEST_TIMEOUT_MS"
ENV_RETRY_BACKOFF_MS: Final = "BERTH_RETRY_BACKOFF_MS"
ENV_RETRY_BACKOFF_MAX_MS: Final = "BERTH_RETRY_BACKOFF_MAX_MS"
ENV_TOKEN_FILE: Final = "BERTH_TOKEN_FILE"
ENV_MAX_RESPONSE_BYTES: Final = "BERTH_MAX_RESPONSE_BYTES"

DEFAULT_COORDINATOR_URL: Final = "http://127.0.0.1:9094"
DEFAULT_ASSIGNORS: Final = ("sticky", "range")

# Kafka's rule for topic names and group.instance.id (Topic.validate, JoinGroupRequest.validateGroupInstanceId).
_KAFKA_NAME = re.compile(r"^[a-zA-Z0-9._-]{1,249}$")


@dataclass(frozen=True)
class MemberConfig:
    """Everything a member needs to take part in a group. Build directly or with ``from_env``."""

    group_id: str
    #: Topic name to partition count: what the member subscribes to, and what the leader assigns.
    topics: Mapping[str, int]
    coordinator_url: str = DEFAULT_COORDINATOR_URL
    #: None: a dynamic member (KIP-394 join); a string: a static member (KIP-345).
    group_instance_id: str | None = None
    session_timeout_ms: int = 45_000
    rebalance_timeout_ms: int = 300_000
    heartbeat_interval_ms: int = 3_000
    #: Protocol names in preference order; the coordinator picks one every member supports.
    assignors: tuple[str, ...] = DEFAULT_ASSIGNORS
    token: str | None = field(default=None, repr=False)
    client_id: str = "berth-member"
    #: Timeout of the calls that are not long-polls (heartbeat, commit, fetch, leave).
    request_timeout_ms: int = 30_000
    retry_backoff_ms: int = 100
    retry_backoff_max_ms: int = 1_000
    #: A PEM file of the CAs an https coordinator's certificate must chain to; None: the system's CAs.
    ca_file: str | None = None
    #: Answers larger than this are refused unread (a coordinator cannot make the member hold more).
    max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES

    def __post_init__(self) -> None:
        _check_group_id("group_id", self.group_id)
        if self.group_instance_id is not None:
            _check_kafka_name("group_instance_id", self.group_instance_id)
        _check_url("coordinator_url", self.coordinator_url)
        object.__setattr__(self, "topics", _checked_topics("topics", self.topics))
        for name in (
            "session_timeout_ms",
            "rebalance_timeout_ms",
            "heartbeat_interval_ms",
            "request_timeout_ms",
            "retry_backoff_ms",
            "retry_backoff_max_ms",
            "max_response_bytes",
        ):
            _check_positive(name, getattr(self, name))
        _check_ca_file("ca_file", self.ca_file, self.coordinator_url)
        if self.heartbeat_interval_ms >= self.session_timeout_ms:
            raise ConfigError(
                "heartbeat_interval_ms",
                f"({self.heartbeat_interval_ms}) must be below session_timeout_ms ({self.session_timeout_ms})",
            )
        if self.retry_backoff_max_ms < self.retry_backoff_ms:
            raise ConfigError("retry_backoff_max_ms", f"must be at least retry_backoff_ms ({self.retry_backoff_ms})")
        object.__setattr__(self, "assignors", _checked_assignors("assignors", self.assignors))
        if self.token == "":
            object.__setattr__(self, "token", None)

    @property
    def is_static(self) -> bool:
        return self.group_instance_id is not None

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> MemberConfig:
        """Read the ``BERTH_*`` variables (``os.environ`` by default); ``ConfigError`` names a bad one.

        Required: ``BERTH_GROUP_ID`` and ``BERTH_TOPICS``. Everything else has Kafka's default.
        """
        env = os.environ if environ is None else environ
        group_id = _required(env, ENV_GROUP_ID)
        _check_group_id(ENV_GROUP_ID, group_id)
        instance_id = env.get(ENV_GROUP_INSTANCE_ID)
        if instance_id is not None:
            _check_kafka_name(ENV_GROUP_INSTANCE_ID, instance_id)
        url = env.get(ENV_COORDINATOR_URL) or DEFAULT_COORDINATOR_URL
        _check_url(ENV_COORDINATOR_URL, url)
        defaults = _DEFAULTS
        session = _env_int(env, ENV_SESSION_TIMEOUT_MS, defaults.session_timeout_ms)
        heartbeat = _env_int(env, ENV_HEARTBEAT_INTERVAL_MS, defaults.heartbeat_interval_ms)
        if heartbeat >= session:
            raise ConfigError(
                ENV_HEARTBEAT_INTERVAL_MS, f"({heartbeat}) must be below {ENV_SESSION_TIMEOUT_MS} ({session})"
            )
        backoff = _env_int(env, ENV_RETRY_BACKOFF_MS, defaults.retry_backoff_ms)
        backoff_max = _env_int(env, ENV_RETRY_BACKOFF_MAX_MS, max(backoff, defaults.retry_backoff_max_ms))
        if backoff_max < backoff:
            raise ConfigError(ENV_RETRY_BACKOFF_MAX_MS, f"({backoff_max}) must be at least {ENV_RETRY_BACKOFF_MS}")
        ca_file = env.get(ENV_CA_FILE) or None
        _check_ca_file(ENV_CA_FILE, ca_file, url)
        return cls(
            group_id=group_id,
            topics=parse_topics(_required(env, ENV_TOPICS), source=ENV_TOPICS),
            coordinator_url=url,
            group_instance_id=instance_id,
            session_timeout_ms=session,
            rebalance_timeout_ms=_env_int(env, ENV_REBALANCE_TIMEOUT_MS, defaults.rebalance_timeout_ms),
            heartbeat_interval_ms=heartbeat,
            assignors=parse_assignors(env.get(ENV_ASSIGNORS, ""), source=ENV_ASSIGNORS),
            token=token_from_env(env),
            client_id=env.get(ENV_CLIENT_ID) or defaults.client_id,
            request_timeout_ms=_env_int(env, ENV_REQUEST_TIMEOUT_MS, defaults.request_timeout_ms),
            retry_backoff_ms=backoff,
            retry_backoff_max_ms=backoff_max,
            ca_file=ca_file,
            max_response_bytes=_env_int(env, ENV_MAX_RESPONSE_BYTES, defaults.max_response_bytes),
        )


def token_from_env(env: Mapping[str, str]) -> str | None:
    """``BERTH_TOKEN``, or the contents of the file ``BERTH_TOKEN_FILE`` names (stripped); not both."""
    inline, path = env.get(ENV_TOKEN) or None, env.get(ENV_TOKEN_FILE) or None
    if inline is not None and path is not None:
        raise ConfigError(ENV_TOKEN_FILE, f"and {ENV_TOKEN} are both set: keep one")
    return inline if path is None else read_token_file(path, source=ENV_TOKEN_FILE)


def read_token_file(path: str, *, source: str) -> str:
    """The token in ``path``, surrounding whitespace removed; ``ConfigError`` naming ``source`` if unusable."""
    try:
        with open(path, encoding="utf-8") as file:
            token = file.read().strip()
    except OSError as exc:
        raise ConfigError(source, f"names {path!r}, which cannot be read: {exc.strerror or exc}") from None
    if not token:
        raise ConfigError(source, f"names {path!r}, which is empty")
    return token


def parse_topics(text: str, *, source: str = ENV_TOPICS) -> Mapping[str, int]:
    """``"orders:24,payments:8"`` → ``{"orders": 24, "payments": 8}``; ``ConfigError`` naming ``source`` if bad."""
    topics: dict[str, int] = {}
    for raw_item in text.split(","):
        item = raw_item.strip()
        if not item:
            continue
        name, separator, count_text = item.rpartition(":")
        name = name.strip()
        if not separator or not name:
            raise ConfigError(source, f"entry {item!r} is not TOPIC:PARTITIONS (e.g. orders:24,payments:8)")
        _check_kafka_name(source, name, what="topic name")
        count = _positive_int(source, count_text.strip(), what=f"partition count of topic {name!r}")
        if name in topics:
            raise ConfigError(source, f"names topic {name!r} twice")
        topics[name] = count
    if not topics:
        raise ConfigError(source, f"names no topic: {text!r} (expected TOPIC:PARTITIONS[,...], e.g. orders:24)")
    return MappingProxyType(topics)


def parse_assignors(text: str, *, source: str = ENV_ASSIGNORS) -> tuple[str, ...]:
    """``"sticky,range"`` → ``("sticky", "range")``; empty means the default preference list."""
    names = tuple(name.strip() for name in text.split(",") if name.strip())
    return _checked_assignors(source, names or DEFAULT_ASSIGNORS)


def _checked_assignors(source: str, names: tuple[str, ...]) -> tuple[str, ...]:
    if not names:
        raise ConfigError(source, "names no assignor")
    unknown = [name for name in names if name not in ASSIGNORS]
    if unknown:
        raise ConfigError(
            source, f"names unknown assignor(s) {', '.join(unknown)}; known: {', '.join(sorted(ASSIGNORS))}"
        )
    if len(set(names)) != len(names):
        raise ConfigError(source, f"names an assignor twice: {', '.join(names)}")
    return tuple(names)


def _checked_topics(source: str, topics: Mapping[str, int]) -> Mapping[str, int]:
    if not topics:
        raise ConfigError(source, "names no topic: a member subscribes to at least one")
    for name, count in topics.items():
        _check_kafka_name(source, name, what="topic name")
        if isinstance(count, bool) or not isinstance(count, int) or count <= 0:
            raise ConfigError(source, f"partition count of topic {name!r} must be a positive integer, got {count!r}")
    return MappingProxyType(dict(topics))


def _required(env: Mapping[str, str], name: str) -> str:
    value = env.get(name)
    if value is None or not value.strip():
        raise ConfigError(name, "is not set")
    return value.strip()


def _env_int(env: Mapping[str, str], name: str, default: int) -> int:
    text = env.get(name)
    if text is None or not text.strip():
        return default
    return _positive_int(name, text.strip(), what="value")


def _positive_int(source: str, text: str, *, what: str) -> int:
    # Decimal digits only: int() would also take "+5", "1_000" and " 7", which an operator never writes.
    if not text.isascii() or not text.isdigit() or int(text) <= 0:
        raise ConfigError(source, f"{what} must be a positive decimal integer, got {text!r}")
    return int(text)


def _check_positive(name: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ConfigError(name, f"must be a positive integer, got {value!r}")


def _check_group_id(name: str, value: object) -> None:
    if not isinstance(value, str) or not value:
        raise ConfigError(name, f"must be a non-empty string, got {value!r}")
    if len(value.encode("utf-8", "surrogatepass")) > MAX_GROUP_ID_BYTES:
        raise ConfigError(name, f"is longer than {MAX_GROUP_ID_BYTES} bytes of UTF-8")


def _check_kafka_name(source: str, value: str, *, what: str = "group.instance.id") -> None:
    if not _KAFKA_NAME.match(value):
        raise ConfigError(source, f"{what} {value!r} is not 1 to 249 characters of [a-zA-Z0-9._-]")


def _check_ca_file(name: str, ca_file: str | None, url: str) -> None:
    if ca_file is None:
        return
    if not url.startswith("https://"):
        raise ConfigError(name, f"is set but the coordinator URL {url!r} is not https://: the token would go in clear")
    verifying_context(ca_file, source=name)


def _check_url(name: str, url: str) -> None:
    if not url.startswith(("http://", "https://")) or len(url) <= len("https://"):
        raise ConfigError(name, f"must be an http:// or https:// URL, got {url!r}")


# The class defaults, read once so that from_env and direct construction agree.
_DEFAULTS: Final = MemberConfig(group_id="defaults", topics={"defaults": 1})
