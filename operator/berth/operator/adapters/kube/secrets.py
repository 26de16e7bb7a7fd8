"""Reading the one Secret a Kafka fleet names for its own principal (``spec.coordinator.kafka``), decoded.

Rules: only Secrets a fleet's spec names, in the fleet's own namespace, are read, when a pass needs them; values
are returned to the caller and never logged. A missing Secret or key is ``None`` (the pass says which, by name); a
namespace whose Secrets the operator's RBAC does not open (HTTP 403: the chart grants them per namespace) is
:class:`~berth.operator.ports.NotPermitted`; another failure is :class:`~berth.operator.ports.ApiCallFailed`. A
:class:`~berth.operator.ports.SecretLookup`.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping

import kubernetes

from berth.operator.adapters.kube.calls import ApiException, api_error_text, port_errors, read_or_none
from berth.operator.ports import NotPermitted


class SecretReader:
    def __init__(self, api_client: kubernetes.client.ApiClient) -> None:
        self.core = kubernetes.client.CoreV1Api(api_client)

    async def read(self, namespace: str, name: str) -> Mapping[str, str] | None:
        with port_errors():
            try:
                secret = await read_or_none(self.core.read_namespaced_secret, name, namespace)
            except ApiException as error:
                if error.status == 403:
                    raise NotPermitted(api_error_text(error)) from error
                raise
        if secret is None:
            return None
        decoded = {}
        for key, value in (secret.get("data") or {}).items():
            try:
                decoded[key] = base64.b64decode(value).decode()
            except (binascii.Error, UnicodeDecodeError):
                continue  # not text: no credential or PEM bundle is binary
        return {**decoded, **(secret.get("stringData") or {})}
