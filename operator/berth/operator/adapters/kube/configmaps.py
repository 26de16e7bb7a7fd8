"""Reading one key of one ConfigMap by name (the analytics job's ``advice.json``), and watching it change.

Rules: only ``get``, and list and watch with a field selector on the name, never other ConfigMaps (the chart grants
exactly that, for exactly that ConfigMap); a missing ConfigMap or key is ``None`` (the analytics job has not run
yet), anything else raises. The watch tells ``on_change`` only when the key's value changed.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import kubernetes

from berth.operator.adapters.kube.api_session import ApiSession
from berth.operator.adapters.kube.calls import port_errors, read_or_none
from berth.operator.adapters.kube.informer import Informer, Obj
from berth.operator.adapters.kube.watch_cache import CONFIG_MAPS


def key_watch(api: ApiSession, namespace: str, name: str, key: str, on_change: Callable[[], None]) -> Informer:
    """An informer of the ConfigMap ``namespace/name`` alone, calling ``on_change`` when its ``key`` changes
    (created, rewritten, removed); started and stopped by the caller."""

    def project(config_map: Obj) -> Obj:
        data: dict[str, Any] = config_map.get("data") or {}
        return {"value": data.get(key)}

    return Informer(
        api,
        CONFIG_MAPS,
        namespace=namespace,
        selector="",
        name=name,
        project=project,
        on_change=lambda old, new: on_change(),
    )


class ConfigMapReader:
    def __init__(self, api_client: kubernetes.client.ApiClient) -> None:
        self.core = kubernetes.client.CoreV1Api(api_client)

    async def read_key(self, namespace: str, name: str, key: str) -> str | None:
        with port_errors():
            config_map = await read_or_none(self.core.read_namespaced_config_map, name, namespace)
        if config_map is None:
            return None
        value = (config_map.get("data") or {}).get(key)
        return value if isinstance(value, str) else None
