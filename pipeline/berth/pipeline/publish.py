"""Publishing ``advice.json`` to a ConfigMap, where the operator reads it (``--advice-configmap``, key ``advice.json``).

Owns ``--publish-configmap``. Rules:
- Patch the ConfigMap's ``advice.json`` key; create the ConfigMap when it does not exist yet (the first run).
  Those are the only calls, and the chart's Role grants exactly get/patch on that name plus create.
- A ConfigMap holds at most 1 MiB: a larger document is refused with a one-line error before any call, saying
  what to do instead (an advice file on a volume, ``--advice-file``).
- The namespace is ``--namespace``, else ``POD_NAMESPACE``, else the pod's service-account namespace file.
- The Kubernetes API is a parameter (``ConfigMapApi``), so the create-or-patch rule is tested without a cluster;
  ``core_v1_api`` builds the real one (in-cluster credentials, else the local kubeconfig).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol

ADVICE_KEY = "advice.json"
CONFIGMAP_MAX_BYTES = 1024 * 1024
SERVICE_ACCOUNT_NAMESPACE_FILE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
MANAGED_BY_LABEL = {"app.kubernetes.io/managed-by": "berth-analyze"}


class PublishError(Exception):
    """The advice could not be published. The message is one line."""


class ConfigMapApi(Protocol):
    """The two calls of kubernetes' ``CoreV1Api`` this module makes."""

    def patch_namespaced_config_map(self, name: str, namespace: str, body: Any) -> Any: ...

    def create_namespaced_config_map(self, namespace: str, body: Any) -> Any: ...


def own_namespace(
    explicit: str | None, environ: Mapping[str, str], service_account_file: Path = SERVICE_ACCOUNT_NAMESPACE_FILE
) -> str:
    if explicit:
        return explicit
    if environ.get("POD_NAMESPACE"):
        return environ["POD_NAMESPACE"]
    try:
        namespace = service_account_file.read_text(encoding="utf-8").strip()
    except OSError:
        namespace = ""
    if not namespace:
        raise PublishError("--publish-configmap: the namespace is unknown (give --namespace or set POD_NAMESPACE)")
    return namespace


def publish_advice(api: ConfigMapApi, namespace: str, name: str, advice_text: str) -> str:
    """Put ``advice_text`` under ``advice.json`` of ConfigMap ``namespace/name``; returns "created" or "updated"."""
    size = len(advice_text.encode("utf-8"))
    if size > CONFIGMAP_MAX_BYTES:
        raise PublishError(
            f"advice.json is {size:,} bytes, over a ConfigMap's 1 MiB: give the operator the file instead "
            "(--advice-file on a shared volume)"
        )
    try:
        api.patch_namespaced_config_map(name, namespace, {"data": {ADVICE_KEY: advice_text}})
        return "updated"
    except Exception as error:
        if _status(error) != 404:
            raise PublishError(f"ConfigMap {namespace}/{name}: {_describe(error)}") from error
    body = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": namespace, "labels": dict(MANAGED_BY_LABEL)},
        "data": {ADVICE_KEY: advice_text},
    }
    try:
        api.create_namespaced_config_map(namespace, body)
    except Exception as error:
        raise PublishError(f"ConfigMap {namespace}/{name}: {_describe(error)}") from error
    return "created"


def core_v1_api() -> ConfigMapApi:
    """The real API client: in-cluster credentials, else the local kubeconfig."""
    import kubernetes

    try:
        kubernetes.config.load_incluster_config()  # type: ignore[no-untyped-call]
    except kubernetes.config.ConfigException:
        try:
            kubernetes.config.load_kube_config()  # type: ignore[no-untyped-call]
        except (kubernetes.config.ConfigException, OSError) as e:
            raise PublishError(f"--publish-configmap: no Kubernetes credentials ({e})") from e
    api: ConfigMapApi = kubernetes.client.CoreV1Api()
    return api


def _status(error: BaseException) -> int | None:
    status = getattr(error, "status", None)
    return status if isinstance(status, int) else None


def _describe(error: BaseException) -> str:
    status = _status(error)
    reason = getattr(error, "reason", None) or type(error).__name__
    return f"HTTP {status} {reason}" if status is not None else str(error) or reason
