"""The real ``kubectl`` and ``helm`` binaries against the tests' control plane, as one identity each.

``Kube`` runs commands with one kubeconfig (the admin's, or a ServiceAccount's from ``kubectl create token``) and
returns what they print; :meth:`Kube.as_service_account` gives the same helper for that account, so a test can do
exactly what the chart's identity may do. Waiting is bounded polling on observable state, never a bare sleep.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import kubernetes
import yaml
from support.kube_cluster import REPO, kubeconfig_text

T = TypeVar("T")
Obj = dict[str, Any]


def find_tool(name: str) -> str | None:
    """The repository's binary (.tools/bin, installed by `make`), else one on PATH, else None."""
    local = REPO / ".tools" / "bin" / name
    if local.is_file() and os.access(local, os.X_OK):
        return str(local)
    return shutil.which(name)


class CommandFailed(AssertionError):
    def __init__(self, argv: Sequence[str], result: subprocess.CompletedProcess[str]) -> None:
        super().__init__(f"{' '.join(argv)} exited {result.returncode}:\n{result.stdout}\n{result.stderr}")
        self.result = result


def wait_until(predicate: Callable[[], T | None], what: str, *, timeout_s: float = 60.0, every_s: float = 0.2) -> T:
    """Poll ``predicate`` until it returns something truthy; fail naming ``what`` after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s:g} s waiting for {what}")
        time.sleep(every_s)


@dataclass(frozen=True)
class Kube:
    kubectl_bin: str
    helm_bin: str
    kubeconfig: Path
    server: str
    ca: Path
    workdir: Path

    @property
    def env(self) -> dict[str, str]:
        return {
            **os.environ,
            "KUBECONFIG": str(self.kubeconfig),
            "HELM_CACHE_HOME": str(self.workdir / "helm-cache"),
            "HELM_CONFIG_HOME": str(self.workdir / "helm-config"),
            "HELM_DATA_HOME": str(self.workdir / "helm-data"),
        }

    def _run(
        self, binary: str, args: Sequence[str], *, input: str | None, check: bool
    ) -> subprocess.CompletedProcess[str]:
        argv = [binary, *args]
        timeout = _subprocess_timeout(args)
        result = subprocess.run(argv, input=input, capture_output=True, text=True, env=self.env, timeout=timeout)
        if check and result.returncode != 0:
            raise CommandFailed(argv, result)
        return result

    def kubectl(self, *args: str, input: str | None = None, check: bool = True) -> subprocess.CompletedProcess[str]:
        return self._run(self.kubectl_bin, args, input=input, check=check)

    def helm(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return self._run(self.helm_bin, args, input=None, check=check)

    def get(self, kind: str, name: str | None = None, *, namespace: str | None = None, **flags: str) -> Any:
        """``kubectl get -o json``; None when the named object does not exist."""
        args = ["get", kind, *([name] if name else []), "-o", "json", *_ns(namespace)]
        args += [f"--{key.replace('_', '-')}={value}" for key, value in flags.items()]
        result = self.kubectl(*args, check=False)
        if result.returncode != 0:
            if "NotFound" in result.stderr:
                return None
            raise CommandFailed(args, result)
        return json.loads(result.stdout)

    def apply(self, *objects: Obj | str, namespace: str | None = None, server_side: bool = False) -> str:
        text = "\n---\n".join(obj if isinstance(obj, str) else yaml.safe_dump(obj) for obj in objects)
        args = ["apply", "-f", "-", *_ns(namespace), *(["--server-side"] if server_side else [])]
        return self.kubectl(*args, input=text).stdout

    def try_apply(self, obj: Obj | str, namespace: str | None = None) -> subprocess.CompletedProcess[str]:
        text = obj if isinstance(obj, str) else yaml.safe_dump(obj)
        return self.kubectl("apply", "-f", "-", *_ns(namespace), input=text, check=False)

    def wait_established(self, crd: str) -> None:
        """Until the CRD serves (``kubectl wait`` fails while a new CRD has no conditions yet)."""

        def established() -> bool:
            conditions = ((self.get("crd", crd) or {}).get("status") or {}).get("conditions") or []
            return any(c["type"] == "Established" and c["status"] == "True" for c in conditions)

        wait_until(established, f"CRD {crd} Established", timeout_s=60)

    def dry_run(self, objects: Sequence[Obj], *, verb: str = "create") -> subprocess.CompletedProcess[str]:
        """``kubectl <verb> --dry-run=server``: every admission and validation step runs, nothing is stored. ``apply``
        also accepts objects that exist already."""
        text = yaml.safe_dump_all(list(objects))
        return self.kubectl(verb, "--dry-run=server", "-f", "-", input=text, check=False)

    def create_namespace(self, name: str, labels: Mapping[str, str] | None = None) -> str:
        self.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": dict(labels or {})}})
        return name

    def token_for(self, namespace: str, service_account: str) -> str:
        return self.kubectl("create", "token", service_account, "-n", namespace, "--duration=2h").stdout.strip()

    def as_service_account(self, namespace: str, service_account: str) -> Kube:
        """The same helper, authenticated as a ServiceAccount (a bound token, as a pod would get)."""
        config = self.workdir / f"sa-{namespace}-{service_account}.kubeconfig"
        config.write_text(
            kubeconfig_text(
                self.server, self.ca, token=self.token_for(namespace, service_account), user=service_account
            )
        )
        return Kube(self.kubectl_bin, self.helm_bin, config, self.server, self.ca, self.workdir)

    def can_i(self, verb: str, resource: str, *, as_user: str, namespace: str | None = None) -> bool:
        """The real authorizer's answer (``kubectl auth can-i --as``), as the admin impersonating ``as_user``."""
        args = ["auth", "can-i", verb, resource, f"--as={as_user}", *_ns(namespace)]
        result = self.kubectl(*args, check=False)
        answer = result.stdout.strip()
        if answer not in ("yes", "no"):
            raise CommandFailed(args, result)
        return answer == "yes"

    def decide(self, user: str, checks: Sequence[tuple[str, str, str, str | None]]) -> list[bool]:
        """The authorizer's decisions for ``user`` on ``(group, resource, verb, namespace)`` checks: one
        SubjectAccessReview each (what ``kubectl auth can-i --as`` asks), sent from the admin's client in one session.
        A resource may carry a subresource (``pods/exec``) and a name (``configmaps:berth-advice``)."""
        client = kubernetes.config.new_client_from_config(config_file=str(self.kubeconfig))
        api = kubernetes.client.AuthorizationV1Api(client)
        answers = []
        try:
            for group, resource, verb, namespace in checks:
                resource, _, name = resource.partition(":")
                plural, _, subresource = resource.partition("/")
                attributes = {
                    "group": group,
                    "resource": plural,
                    "subresource": subresource,
                    "verb": verb,
                    "name": name,
                    "namespace": namespace or "",
                }
                review = api.create_subject_access_review(
                    {
                        "apiVersion": "authorization.k8s.io/v1",
                        "kind": "SubjectAccessReview",
                        "spec": {"user": user, "resourceAttributes": attributes},
                    }
                )
                answers.append(bool(review.status.allowed))
        finally:
            client.close()
        return answers

    def events(self, namespace: str, *, kind: str, name: str) -> list[Obj]:
        """What the Events about the object say, oldest first: one entry per thing said (:func:`said`)."""
        found = self.get(
            "events", namespace=namespace, field_selector=f"involvedObject.kind={kind},involvedObject.name={name}"
        )
        ordered = sorted(found["items"], key=lambda event: event.get("lastTimestamp") or event.get("eventTime") or "")
        return [part for event in ordered for part in said(event)]


def _ns(namespace: str | None) -> list[str]:
    return ["-n", namespace] if namespace else []


#: How long a kubectl or helm call may take unless it sets its own ``--timeout``.
COMMAND_TIMEOUT_S = 180.0


#: Where a coalesced Event's message starts another part: "; " and the next part's reason.
_NEXT_PART = re.compile(r"; (?=[A-Z][A-Za-z0-9]*: )")


def said(event: Obj) -> list[Obj]:
    """What one Event says, as Events of their own: itself, or, where the operator coalesced what one pass said into
    one Event (its message ``Reason: message; Reason: message``, named for the first), each part with its reason."""
    reason, message = str(event.get("reason") or ""), str(event.get("message") or "")
    if not message.startswith(f"{reason}: "):
        return [event]
    parts = [part.partition(": ") for part in _NEXT_PART.split(message)]
    return [{**event, "reason": part_reason, "message": part_message} for part_reason, _, part_message in parts]


def _subprocess_timeout(args: Sequence[str]) -> float:
    """The command's own ``--timeout=<n>s``/``<n>m`` (a rollout, a wait) with a margin for it to say so itself,
    else :data:`COMMAND_TIMEOUT_S`."""
    for arg in args:
        if arg.startswith("--timeout="):
            value = arg.removeprefix("--timeout=")
            unit = {"s": 1, "m": 60}.get(value[-1:])
            if unit is not None and value[:-1].isdigit():
                return max(COMMAND_TIMEOUT_S, int(value[:-1]) * unit + 30.0)
    return COMMAND_TIMEOUT_S
