"""Cluster DNS for the node tier: a small responder in place of CoreDNS (which no registry here packages).

``python -m support.node_dns --listen IP --kubeconfig FILE [--domain cluster.local]`` answers UDP queries on
``IP:53`` (the node's address, which the kubelet gives pods as their nameserver), as CoreDNS's ``kubernetes``
plugin would for the names Berth's pods use:

- ``<service>.<namespace>.svc.<domain>``: A, the Service's ClusterIP; a headless Service's endpoint addresses;
- ``<hostname>.<service>.<namespace>.svc.<domain>``: A, the address of the endpoint with that hostname (a
  StatefulSet's pod under its governing Service);
- any other type for those names: an empty answer; any other name: NXDOMAIN (there is no upstream resolver).

Like CoreDNS, it answers from memory: Services and Endpoints are listed and watched (one thread each; a broken
watch relists), so an answer never waits on the apiserver, however busy. It prints ``answering on ...`` once both
lists are in. Answers carry a TTL of 5 s.
"""

from __future__ import annotations

import argparse
import socket
import struct
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

import kubernetes

A, TTL = 1, 5
NOERROR, FORMERR, NXDOMAIN = 0, 1, 3
RELIST_AFTER_S = 1.0


def parse_question(packet: bytes) -> tuple[int, int, str, int, int]:
    """(id, flags, name, qtype, end of the question) of a query with one question."""
    ident, flags, count = struct.unpack("!HHH", packet[:6])
    if count != 1:
        raise ValueError("one question per query")
    labels, offset = [], 12
    while (length := packet[offset]) != 0:
        if length & 0xC0:
            raise ValueError("compressed question")
        labels.append(packet[offset + 1 : offset + 1 + length].decode("ascii").lower())
        offset += 1 + length
    qtype, _qclass = struct.unpack("!HH", packet[offset + 1 : offset + 5])
    return ident, flags, ".".join(labels), qtype, offset + 5


def answer(packet: bytes, rcode: int, addresses: list[str], qtype: int) -> bytes:
    ident, flags, _name, _qtype, end = parse_question(packet)
    records = addresses if qtype == A else []
    # QR, the query's opcode and RD, AA, RA.
    reply_flags = 0x8000 | (flags & 0x7900) | 0x0400 | 0x0080 | rcode
    header = struct.pack("!HHHHHH", ident, reply_flags, 1, len(records), 0, 0)
    body = b"".join(struct.pack("!HHHIH", 0xC00C, A, 1, TTL, 4) + socket.inet_aton(ip) for ip in records)
    return header + packet[12:end] + body


class Mirror:
    """One kind's objects by (namespace, name), kept by list and watch in a thread of its own (each update is one
    dict operation or one assignment, which the answering thread sees whole)."""

    def __init__(self, kind: str, list_all: Callable[..., Any]) -> None:
        self.kind = kind
        self.list_all = list_all
        self.objects: dict[tuple[str, str], Any] = {}
        self.synced = threading.Event()

    def get(self, namespace: str, name: str) -> Any:
        return self.objects.get((namespace, name))

    def run(self) -> None:
        while True:
            try:
                listed = self.list_all(_request_timeout=30)
                self.objects = {(o.metadata.namespace, o.metadata.name): o for o in listed.items}
                self.synced.set()
                stream = kubernetes.watch.Watch().stream(
                    self.list_all,
                    resource_version=listed.metadata.resource_version,
                    timeout_seconds=300,
                    _request_timeout=330,  # a silent connection is given up, not waited on forever
                )
                for event in stream:
                    found = event["object"]
                    key = (found.metadata.namespace, found.metadata.name)
                    if event["type"] == "DELETED":
                        self.objects.pop(key, None)
                    else:
                        self.objects[key] = found
            except Exception as error:  # the apiserver unreachable a moment, a watch expired: relist
                print(f"{self.kind}: {error!r}; relisting", file=sys.stderr, flush=True)
                time.sleep(RELIST_AFTER_S)


class Resolver:
    def __init__(self, services: Mirror, endpoints: Mirror, domain: str) -> None:
        self.services = services
        self.endpoints = endpoints
        self.suffix = f".svc.{domain}"

    def lookup(self, name: str) -> list[str] | None:
        """The addresses of ``name``, or None when it does not exist."""
        if not name.endswith(self.suffix):
            return None
        parts = name[: -len(self.suffix)].split(".")
        if len(parts) == 2:
            service, namespace = parts
            host = None
        elif len(parts) == 3:
            host, service, namespace = parts
        else:
            return None
        found = self.services.get(namespace, service)
        if found is None:
            return None
        cluster_ip = found.spec.cluster_ip
        if host is None and cluster_ip and cluster_ip != "None":
            return [cluster_ip]
        endpoints = self.endpoints.get(namespace, service)
        if endpoints is None:
            return [] if host is None else None
        addresses = [
            address
            for subset in endpoints.subsets or []
            for address in (subset.addresses or []) + (subset.not_ready_addresses or [])
        ]
        if host is None:
            return sorted({a.ip for a in addresses})
        matching = sorted({a.ip for a in addresses if a.hostname == host})
        return matching or None


def serve(listen: str, kubeconfig: str, domain: str) -> None:
    core = kubernetes.client.CoreV1Api(kubernetes.config.new_client_from_config(config_file=kubeconfig))
    services = Mirror("services", core.list_service_for_all_namespaces)
    endpoints = Mirror("endpoints", core.list_endpoints_for_all_namespaces)
    for mirror in (services, endpoints):
        threading.Thread(target=mirror.run, name=mirror.kind, daemon=True).start()
    for mirror in (services, endpoints):
        mirror.synced.wait()
    resolver = Resolver(services, endpoints, domain)
    server = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    server.bind((listen, 53))
    print(f"answering on {listen}:53 for *.svc.{domain}", flush=True)
    while True:
        packet, peer = server.recvfrom(4096)
        try:
            _ident, _flags, name, qtype, _end = parse_question(packet)
        except (ValueError, IndexError, struct.error, UnicodeDecodeError):
            if len(packet) >= 12:
                server.sendto(packet[:2] + struct.pack("!H", 0x8000 | FORMERR) + b"\0" * 8, peer)
            continue
        addresses = resolver.lookup(name)
        rcode = NXDOMAIN if addresses is None else NOERROR
        server.sendto(answer(packet, rcode, addresses or [], qtype), peer)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--listen", required=True)
    parser.add_argument("--kubeconfig", required=True)
    parser.add_argument("--domain", default="cluster.local")
    args = parser.parse_args()
    serve(args.listen, args.kubeconfig, args.domain)


if __name__ == "__main__":
    main()
