"""Who the operator is on the Kubernetes API: in-cluster service account, else the ``KUBECONFIG`` file(s).

One loader serves both clients: the official ``kubernetes`` client the operator's own calls use, and Kopf (through
:func:`connection_info`, returned by the operator's login handler). Rules:

- In a pod, the service account wins; outside one, ``KUBECONFIG`` is read when the loader runs, not when the
  ``kubernetes`` package was imported (its default path is frozen at import time), so tests can point it at an
  emulator.
- A fresh :class:`kubernetes.client.Configuration` per load: the client's process-wide default is never touched.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import kopf
import kubernetes


class KubeIdentityError(RuntimeError):
    """Neither in-cluster credentials nor a usable kubeconfig."""


@dataclass(frozen=True)
class KubeIdentity:
    configuration: kubernetes.client.Configuration
    source: str  # for the start-up log: "in-cluster service account" or "kubeconfig PATH"


def load_identity() -> KubeIdentity:
    configuration = kubernetes.client.Configuration()
    try:
        kubernetes.config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
        return KubeIdentity(configuration, "in-cluster service account")
    except kubernetes.config.ConfigException as in_cluster:
        path = os.environ.get("KUBECONFIG") or os.path.expanduser("~/.kube/config")
        try:
            kubernetes.config.load_kube_config(  # type: ignore[no-untyped-call]
                config_file=path, client_configuration=configuration, persist_config=False
            )
        except (kubernetes.config.ConfigException, OSError) as kubeconfig:
            raise KubeIdentityError(
                f"no Kubernetes credentials: not in a pod ({in_cluster}) and kubeconfig {path} is unusable"
                f" ({kubeconfig})"
            ) from None
        return KubeIdentity(configuration, f"kubeconfig {path}")


def connection_info(identity: KubeIdentity) -> kopf.ConnectionInfo:
    """The same identity in Kopf's terms."""
    config = identity.configuration
    # The bearer token (refreshed by the in-cluster loader's hook when it rotates) sits under "BearerToken" in
    # kubernetes>=36 and under "authorization" before.
    header = config.get_api_key_with_prefix("BearerToken") or config.get_api_key_with_prefix("authorization")
    scheme, _, token = (header or "").partition(" ")
    if not token:
        scheme, token = "", scheme
    return kopf.ConnectionInfo(
        server=config.host,
        ca_path=config.ssl_ca_cert or None,
        insecure=not config.verify_ssl,
        username=config.username or None,
        password=config.password or None,
        scheme=scheme or None,
        token=token or None,
        certificate_path=config.cert_file or None,
        private_key_path=config.key_file or None,
    )
