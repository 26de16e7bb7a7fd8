"""Endpoints a fleet may name, in one canonical form: a Berth coordinator URL or a Kafka bootstrap list.

The operator sends credentials only to endpoints it is configured to trust, and one group belongs to one fleet per
endpoint; both checks compare canonical forms, so that aliases of one endpoint (``:09094``, a trailing dot,
``.svc``, ``.svc.cluster.local``, upper case) compare equal and forms that smuggle more than an endpoint (user info,
a path, a query, a fragment) are refused. Rules:

- Schemes are ``http`` and ``https``; the port is explicit or the scheme's (80, 443); Kafka's default port is 9092.
- Host names are lower-cased, lose a trailing dot, and a Service's ``<name>.<namespace>.svc[.<cluster domain>]``
  becomes ``<name>.<namespace>``; IP addresses are written the standard way (IPv6 in brackets).
- :class:`EndpointError` names what is wrong, in words that can go into a condition.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass
from urllib.parse import urlsplit

DEFAULT_PORTS = {"http": 80, "https": 443}
KAFKA_DEFAULT_PORT = 9092
#: RFC 1123 labels (Kubernetes Service and namespace names are a subset).
_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")
_SERVICE = re.compile(r"^(?P<service>[^.]+\.[^.]+)\.svc(\..+)?$")


class EndpointError(ValueError):
    """A coordinator URL or bootstrap address that is not a plain endpoint."""


@dataclass(frozen=True, order=True, slots=True)
class Endpoint:
    """A host and port, with the scheme for coordinator URLs ("" for Kafka addresses)."""

    scheme: str
    host: str
    port: int

    @property
    def url(self) -> str:
        return f"{self.scheme}://{self.host}:{self.port}"

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    def __str__(self) -> str:
        return self.url if self.scheme else self.address


def canonical_host(host: str) -> str:
    """``Berth-Coordinator.berth.svc.cluster.local.`` -> ``berth-coordinator.berth``; IPs in standard form."""
    text = host.strip().removesuffix(".")
    if text.startswith("[") and text.endswith("]"):
        text = text[1:-1]
    try:
        ip = ipaddress.ip_address(text)
    except ValueError:
        pass
    else:
        return f"[{ip.compressed}]" if ip.version == 6 else ip.compressed
    name = text.lower()
    if not name or len(name) > 253 or not all(_LABEL.fullmatch(label) for label in name.split(".")):
        raise EndpointError(f"{host!r} is not a host name")
    service = _SERVICE.match(name)
    return service.group("service") if service else name


def parse_coordinator_url(text: str) -> Endpoint:
    """A Berth coordinator's base URL: scheme, host and port only."""
    try:
        parts = urlsplit(text.strip())
        port = parts.port
    except ValueError as error:
        raise EndpointError(f"{text!r} is not a URL: {error}") from None
    if parts.scheme not in DEFAULT_PORTS:
        raise EndpointError(f"{text!r}: the scheme must be http or https")
    if parts.username is not None or parts.password is not None or "@" in parts.netloc:
        raise EndpointError(f"{text!r}: user information is not allowed in a coordinator URL")
    if parts.path not in ("", "/") or parts.query or parts.fragment or text.strip().endswith(("?", "#")):
        raise EndpointError(f"{text!r}: a coordinator URL is scheme://host:port, without a path, query or fragment")
    if not parts.hostname:
        raise EndpointError(f"{text!r}: no host")
    return Endpoint(parts.scheme, canonical_host(parts.hostname), port or DEFAULT_PORTS[parts.scheme])


def parse_kafka_address(text: str) -> Endpoint:
    """One ``host[:port]`` of a bootstrap list."""
    host, port = text.strip(), KAFKA_DEFAULT_PORT
    match = re.fullmatch(r"(?P<host>\[[^\]]+\]|[^:\[\]]+)(?::(?P<port>\d{1,5}))?", host)
    if match is None:
        raise EndpointError(f"{text!r} is not host:port")
    if match.group("port") is not None:
        port = int(match.group("port"))
    if not 0 < port < 65536:
        raise EndpointError(f"{text!r}: port {port} is out of range")
    return Endpoint("", canonical_host(match.group("host")), port)


def parse_bootstrap_servers(text: str | list[str] | tuple[str, ...]) -> tuple[Endpoint, ...]:
    """A bootstrap list (comma-separated, or a list): canonical, sorted, without repeats; never empty."""
    items = text.split(",") if isinstance(text, str) else list(text)
    addresses = tuple(sorted({parse_kafka_address(item) for item in items if item.strip()}))
    if not addresses:
        raise EndpointError("no bootstrap server")
    return addresses


def bootstrap_text(addresses: tuple[Endpoint, ...]) -> str:
    """The canonical bootstrap list as clients take it: ``host:port,host:port``."""
    return ",".join(address.address for address in addresses)
