"""Derive the Kubernetes API permissions the operator's code needs, by reading its source with ``ast``.

tests/chart compares the result with the chart's operator rules: every needed permission granted, nothing granted
that is not needed. A permission is ``(apiGroup, resource, verb)``; a subresource is ``"resource/sub"``.

What is recognised:

- kubernetes-client calls and references (``apps.create_namespaced_stateful_set(...)``,
  ``asyncio.to_thread(core.read_namespaced_pod, ...)``, ``watch.Watch().stream(core.list_namespaced_pod, ...)``).
  The method's HTTP verb and resource path are read from the installed ``kubernetes`` package's source (its
  ``_<method>_serialize`` names them), so ``*_status``, ``*_scale``, ``*_eviction``, collections and
  ``CustomObjectsApi`` (group and plural from the call's arguments or string constants) need no table here.
  A method several API classes share (``create_namespaced_event``: core and events.k8s.io) is resolved from the
  receiver (``EventsV1Api()``, a variable assigned or annotated with one); failing that, all candidates count.
- The operator's own watches: ``WatchedResource("apps", "v1", "statefulsets")`` (``kube.informer``, listed and
  watched over its own HTTP session, which no client method shows) needs list and watch on that resource.
- Kopf handler decorators (``@kopf.on.create("berth.dev", "v1alpha1", "consumerfleets")``, ``@kopf.timer``,
  ``@kopf.daemon``, ``@kopf.on.event``, ``@kopf.index``...), parsed with Kopf's own selector rules.
- ``kopf.event``/``info``/``warn``/``exception``: core Events.
- Owner references with ``blockOwnerDeletion: True`` (or ``kopf.adopt``/``append_owner_reference``): update on the
  owner's ``finalizers`` subresource (OwnerReferencesPermissionEnforcement).

Kopf's own needs that no line of the operator shows are listed, with reasons, in :data:`KOPF_IMPLICIT`.
"""

from __future__ import annotations

import ast
import functools
import importlib.util
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

Permission = tuple[str, str, str]  # (apiGroup, resource or resource/subresource, verb)

#: The operator's primary resource: the owner of everything it creates (for blockOwnerDeletion).
PRIMARY = ("berth.dev", "consumerfleets")

#: What Kopf itself does with the API in standalone mode, beyond what the handlers' selectors imply. Applies as soon
#: as the operator has at least one Kopf resource handler.
KOPF_IMPLICIT: dict[Permission, str] = {
    # kopf._core.reactor.observation.resource_observer: watches CRDs to notice resources that appear or disappear
    # at run time. Cluster-scoped, so only a cluster-wide install can grant it; restricted to namespaces, Kopf
    # logs a warning and keeps its start-up discovery (settings.scanning.disabled silences it).
    ("apiextensions.k8s.io", "customresourcedefinitions", "list"): "Kopf observes CRDs",
    ("apiextensions.k8s.io", "customresourcedefinitions", "watch"): "Kopf observes CRDs",
    # kopf._cogs.clients.events.post_event: handler outcomes, and every INFO+ record of a handler's logger
    # (settings.posting), become core/v1 Events on the object.
    ("", "events", "create"): "Kopf posts Events",
}
#: Of those, the ones a namespace-restricted install (Role only) cannot grant.
KOPF_CLUSTER_ONLY: frozenset[Permission] = frozenset(p for p in KOPF_IMPLICIT if p[1] == "customresourcedefinitions")
# Not needed, deliberately: peering (standalone mode: no kopf.dev [cluster]kopfpeerings); admission webhook
# configurations (no @kopf.on.validate/mutate); namespaces (observed only when restricted to namespace patterns,
# where a Role cannot grant them and Kopf falls back to the namespaces it was given).

#: Kopf decorators -> the verbs Kopf needs on the handler's resource.
_WATCH_ONLY = ("list", "watch")
# Change handlers, timers and daemons: Kopf also patches the object (finalizer, progress and last-handled
# configuration annotations).
_WATCH_AND_PATCH = ("list", "watch", "patch")
KOPF_DECORATORS: dict[str, tuple[str, ...]] = {
    "on.event": _WATCH_ONLY,
    "on.index": _WATCH_ONLY,
    "on.create": _WATCH_AND_PATCH,
    "on.update": _WATCH_AND_PATCH,
    "on.delete": _WATCH_AND_PATCH,
    "on.resume": _WATCH_AND_PATCH,
    "on.field": _WATCH_AND_PATCH,
    "on.timer": _WATCH_AND_PATCH,
    "on.daemon": _WATCH_AND_PATCH,
}
#: ``kopf.timer`` is ``kopf.on.timer``, and so on.
_KOPF_DECORATOR_ALIASES = {"timer": "on.timer", "daemon": "on.daemon", "index": "on.index"}
_KOPF_EVENT_FUNCTIONS = {"event", "info", "warn", "exception"}
_KOPF_OWNER_FUNCTIONS = {"adopt", "append_owner_reference"}

#: Built-in resources a Kopf selector may name without its group (kind, plural or singular).
BUILTIN_RESOURCES: dict[str, tuple[str, str]] = {
    name: (group, plural)
    for group, plural, kind in (
        ("", "pods", "Pod"),
        ("", "services", "Service"),
        ("", "configmaps", "ConfigMap"),
        ("", "secrets", "Secret"),
        ("", "events", "Event"),
        ("", "namespaces", "Namespace"),
        ("", "persistentvolumeclaims", "PersistentVolumeClaim"),
        ("", "endpoints", "Endpoints"),
        ("", "nodes", "Node"),
        ("apps", "statefulsets", "StatefulSet"),
        ("apps", "deployments", "Deployment"),
        ("policy", "poddisruptionbudgets", "PodDisruptionBudget"),
        ("coordination.k8s.io", "leases", "Lease"),
    )
    for name in (plural, kind, kind.lower())
}

_HTTP_VERBS = {"POST": "create", "PUT": "update", "PATCH": "patch"}


@dataclass(frozen=True)
class Endpoint:
    """One kubernetes-client method: its API class, HTTP method and resource path."""

    api_class: str
    method: str
    http_method: str
    path: str
    params: tuple[str, ...]  # positional parameter names, without self


@dataclass
class ScanResult:
    permissions: set[Permission] = field(default_factory=set)
    evidence: dict[Permission, list[str]] = field(default_factory=dict)
    unresolved: list[str] = field(default_factory=list)  # calls or selectors the scanner could not map
    ambiguous: list[str] = field(default_factory=list)  # methods counted for every API class that has them
    kopf_handlers: int = 0

    def add(self, permission: Permission, where: str) -> None:
        self.permissions.add(permission)
        self.evidence.setdefault(permission, []).append(where)


# --- kubernetes-client introspection -------------------------------------------------------------------------


@functools.cache
def _api_sources() -> dict[str, str]:
    """API class name -> the source of its module. Read as text, not imported: importing the API modules imports
    the client's ~1,000 pydantic models (seconds), and the text says everything needed."""
    spec = importlib.util.find_spec("kubernetes")  # locates the package without importing it
    assert spec is not None and spec.origin is not None, "the kubernetes client is not installed"
    sources = {}
    for path in sorted((Path(spec.origin).parent / "client" / "api").glob("*_api.py")):
        text = path.read_text()
        if declared := re.search(r"^class (\w+Api)\b", text, re.M):
            sources[declared.group(1)] = text
    return sources


#: Variants of every client method that make the same request.
_METHOD_VARIANTS = ("_with_http_info", "_without_preload_content")


@functools.cache
def endpoints_for(method: str) -> tuple[Endpoint, ...]:
    """Every API class method called ``method``, with the HTTP verb and resource path its serializer uses."""
    for variant in _METHOD_VARIANTS:
        method = method.removesuffix(variant)
    found = []
    for class_name, text in _api_sources().items():
        serializer = text.find(f"\n    def _{method}_serialize(")
        signature = text.find(f"\n    def {method}(\n")
        if serializer < 0 or signature < 0:
            continue
        body = text[serializer : serializer + 8000]
        http = re.search(r"method='([A-Z]+)'", body)
        path = re.search(r"resource_path='([^']+)'", body)
        if http is None or path is None:
            continue
        header = text[signature : text.find("\n    ) ->", signature)]
        params = tuple(p for p in re.findall(r"^        (\w+):", header, re.M) if p != "self")
        found.append(Endpoint(class_name, method, http.group(1), path.group(1), params))
    return tuple(found)


def permission_of(endpoint: Endpoint, args: dict[str, str | None], watch: bool) -> list[Permission] | str:
    """The permissions one call needs, or why they cannot be told (an unresolvable group or plural)."""
    parts = endpoint.path.strip("/").split("/")
    if parts[0] == "api":  # /api/v1/...
        group, rest = "", parts[2:]
    else:  # /apis/GROUP/VERSION/...
        group, rest = parts[1], parts[3:]
    if len(rest) >= 2 and rest[0] == "namespaces" and rest[1] == "{namespace}":
        rest = rest[2:]
    if not rest:
        return f"{endpoint.method}: no resource in {endpoint.path}"
    resource, named, sub = rest[0], len(rest) >= 2, rest[2] if len(rest) >= 3 else None
    if group == "{group}" or resource == "{plural}":
        group_value = args.get("group") if group == "{group}" else group
        plural_value = args.get("plural") if resource == "{plural}" else resource
        if group_value is None or plural_value is None:
            return f"{endpoint.method}: group/plural not a string literal or constant"
        group, resource = group_value, plural_value
    if endpoint.http_method == "GET":
        verbs = ["get"] if named else ["list", "watch"] if watch else ["list"]
    elif endpoint.http_method == "DELETE":
        verbs = ["delete"] if named else ["deletecollection"]
    else:
        verbs = [_HTTP_VERBS[endpoint.http_method]]
    full = f"{resource}/{sub}" if sub else resource
    return [(group, full, verb) for verb in verbs]


# --- the scan ------------------------------------------------------------------------------------------------


def _dotted(node: ast.AST) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = _dotted(node.value)
        return f"{base}.{node.attr}" if base else None
    return None


def _string_constants(trees: Iterable[ast.Module]) -> dict[str, str | None]:
    """NAME -> value for every module- or class-level ``NAME = "literal"``; None when NAME has several values."""
    values: dict[str, str | None] = {}
    for tree in trees:
        bodies = [tree.body] + [node.body for node in ast.walk(tree) if isinstance(node, ast.ClassDef)]
        for body in bodies:
            for statement in body:
                target: ast.expr | None = None
                value: ast.expr | None = None
                if isinstance(statement, ast.Assign) and len(statement.targets) == 1:
                    target, value = statement.targets[0], statement.value
                elif isinstance(statement, ast.AnnAssign):
                    target, value = statement.target, statement.value
                if isinstance(target, ast.Name) and isinstance(value, ast.Constant) and isinstance(value.value, str):
                    name = target.id
                    values[name] = value.value if values.get(name, value.value) == value.value else None
    return values


class _ModuleScanner(ast.NodeVisitor):
    def __init__(
        self,
        where: str,
        tree: ast.Module,
        constants: dict[str, str | None],
        resources: dict[str, tuple[str, str]],
    ) -> None:
        self.where = where
        self.constants = constants
        self.resources = resources
        self.kopf_aliases = _kopf_aliases(tree)
        self.result = ScanResult()
        self.receiver_types = self._receiver_types(tree)
        # Attribute nodes already handled as a call's function, so the generic reference pass skips them.
        self.seen: set[int] = set()

    # -- helpers

    @staticmethod
    def _receiver_types(tree: ast.Module) -> dict[str, str]:
        """Receiver text -> API class name, from ``x = SomeApi(...)``, ``x: SomeApi`` and annotated parameters."""
        types: dict[str, str] = {}

        def api_name(node: ast.AST | None) -> str | None:
            if isinstance(node, ast.Call):
                node = node.func
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                name: str | None = node.value.rsplit(".", 1)[-1]
            else:
                dotted = _dotted(node) if node is not None else None
                name = dotted.rsplit(".", 1)[-1] if dotted else None
            return name if name and name.endswith("Api") else None

        for node in ast.walk(tree):
            if isinstance(node, ast.Assign):
                cls = api_name(node.value)
                for target in node.targets:
                    if cls and (text := _dotted(target)):
                        types[text] = cls
            elif isinstance(node, ast.AnnAssign):
                cls = api_name(node.annotation) or api_name(node.value)
                if cls and (text := _dotted(node.target)):
                    types[text] = cls
            elif isinstance(node, ast.arg):
                cls = api_name(node.annotation)
                if cls:
                    types[node.arg] = cls
        return types

    def _value(self, node: ast.expr) -> str | None:
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return node.value
        if isinstance(node, ast.Name):
            return self.constants.get(node.id)
        if isinstance(node, ast.Attribute):
            return self.constants.get(node.attr)
        return None

    def _line(self, node: ast.AST) -> str:
        return f"{self.where}:{getattr(node, 'lineno', 0)}"

    def _client_reference(
        self, attr: ast.Attribute, args: list[ast.expr], keywords: list[ast.keyword], watch: bool
    ) -> None:
        candidates = endpoints_for(attr.attr)
        if not candidates:
            return
        receiver = _dotted(attr.value)
        if isinstance(attr.value, ast.Call):
            receiver_class = (_dotted(attr.value.func) or "").rsplit(".", 1)[-1]
        else:
            receiver_class = self.receiver_types.get(receiver or "", "")
        chosen = [e for e in candidates if e.api_class == receiver_class] or list(candidates)
        if len(chosen) > 1:
            classes = ", ".join(e.api_class for e in chosen)
            self.result.ambiguous.append(f"{self._line(attr)}: {attr.attr} on {receiver or '?'} could be {classes}")
        for endpoint in chosen:
            values: dict[str, str | None] = {}
            for name, arg in zip(endpoint.params, args, strict=False):
                values[name] = self._value(arg)
            for keyword in keywords:
                if keyword.arg is not None:
                    values[keyword.arg] = self._value(keyword.value)
            call_watches = watch or any(
                k.arg == "watch" and isinstance(k.value, ast.Constant) and k.value.value is True for k in keywords
            )
            permissions = permission_of(endpoint, values, call_watches)
            if isinstance(permissions, str):
                self.result.unresolved.append(f"{self._line(attr)}: {permissions}")
                continue
            for permission in permissions:
                self.result.add(permission, f"{self._line(attr)}: {endpoint.api_class}.{attr.attr}")

    def _kopf_name(self, node: ast.expr) -> str | None:
        """The name under the kopf module: ``kopf.on.create`` and ``on.create`` -> "on.create", ``kopf.event`` ->
        "event"; None when ``node`` is not a Kopf name."""
        dotted = _dotted(node)
        if dotted is None:
            return None
        head, _, rest = dotted.partition(".")
        if head in self.kopf_aliases and rest:
            return rest
        return dotted if head == "on" and rest else None

    def _kopf_handler(self, function: ast.FunctionDef | ast.AsyncFunctionDef, decorator: ast.Call, kind: str) -> None:
        from kopf._cogs.structs.references import Selector

        self.result.kopf_handlers += 1
        where = self._line(decorator)
        selector_keys = {"group", "version", "kind", "plural", "singular", "shortcut", "category"}
        raw = [self._value(arg) for arg in decorator.args]
        raw_named = {k.arg: self._value(k.value) for k in decorator.keywords if k.arg in selector_keys}
        positional = [value for value in raw if value is not None]
        named: dict[str, Any] = {key: value for key, value in raw_named.items() if key and value is not None}
        if len(positional) < len(raw) or len(named) < len(raw_named):
            self.result.unresolved.append(f"{where}: @kopf.{kind} selector is not made of string constants")
            return
        if len(positional) > 3:
            self.result.unresolved.append(f"{where}: @kopf.{kind} has more than three selector arguments")
            return
        first, second, third = [*positional, None, None, None][:3]
        try:
            selector = Selector(first, second, third, **named)  # Kopf's own parsing of its selector arguments
        except TypeError as error:
            self.result.unresolved.append(f"{where}: @kopf.{kind}: {error}")
            return
        name = selector.plural or selector.kind or selector.singular or selector.any_name or selector.shortcut
        resolved = self.resources.get(name) if isinstance(name, str) else None
        if resolved is None or (selector.group is not None and selector.group != resolved[0]):
            if selector.group is not None and isinstance(name, str):
                resolved = (selector.group, name)
            else:
                self.result.unresolved.append(f"{where}: @kopf.{kind}: cannot tell the resource of {name!r}")
                return
        group, plural = resolved
        for verb in KOPF_DECORATORS[kind]:
            self.result.add((group, plural, verb), f"{where}: @kopf.{kind}")
        if kind != "on.event" and kind != "on.index" and _writes_status(function):
            self.result.add((group, f"{plural}/status", "patch"), f"{where}: @kopf.{kind} writes status")

    # -- visitors

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        self._visit_function(node)

    def visit_AsyncFunctionDef(self, node: ast.AsyncFunctionDef) -> None:
        self._visit_function(node)

    def _visit_function(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        for decorator in node.decorator_list:
            call = decorator if isinstance(decorator, ast.Call) else None
            name = self._kopf_name(call.func if call else decorator)
            kind = _KOPF_DECORATOR_ALIASES.get(name or "", name)
            if kind in KOPF_DECORATORS and call is not None:
                self._kopf_handler(node, call, kind)
            elif kind in KOPF_DECORATORS:
                self.result.unresolved.append(f"{self._line(decorator)}: @kopf.{kind} without a selector")
        self.generic_visit(node)

    def _watched_resource(self, node: ast.Call) -> None:
        values = [self._value(arg) for arg in node.args]
        if len(values) != 3 or any(value is None for value in values):
            self.result.unresolved.append(f"{self._line(node)}: WatchedResource is not made of string constants")
            return
        group, _, plural = values
        for verb in _WATCH_ONLY:
            self.result.add((str(group), str(plural), verb), f"{self._line(node)}: WatchedResource({plural!r})")

    def visit_Call(self, node: ast.Call) -> None:
        if (_dotted(node.func) or "").rsplit(".", 1)[-1] == "WatchedResource":
            self._watched_resource(node)
        function = self._kopf_name(node.func)
        if function in _KOPF_EVENT_FUNCTIONS:
            self.result.add(("", "events", "create"), f"{self._line(node)}: kopf.{function}")
        if function in _KOPF_OWNER_FUNCTIONS:
            self._owner_reference(node, f"kopf.{function}")
        if isinstance(node.func, ast.Attribute):
            self.seen.add(id(node.func))
            self._client_reference(node.func, list(node.args), list(node.keywords), watch=False)
        # A client method passed to a wrapper: to_thread(fn, *args), partial(fn, ...), run_in_executor(None, fn,
        # ...), Watch().stream(fn, ...). The wrapper's later arguments are the method's.
        streams = isinstance(node.func, ast.Attribute) and node.func.attr == "stream"
        for position, arg in enumerate(node.args):
            if isinstance(arg, ast.Attribute) and endpoints_for(arg.attr):
                self.seen.add(id(arg))
                self._client_reference(arg, list(node.args[position + 1 :]), list(node.keywords), watch=streams)
        for keyword in node.keywords:
            if keyword.arg in ("block_owner_deletion", "blockOwnerDeletion") and _is_true(keyword.value):
                self._owner_reference(node, f"{keyword.arg}=True")
        self.generic_visit(node)

    def visit_Attribute(self, node: ast.Attribute) -> None:
        # Any other reference to a client method (stored in a variable, a dict of callables...).
        if id(node) not in self.seen and endpoints_for(node.attr):
            self._client_reference(node, [], [], watch=False)
        self.generic_visit(node)

    def visit_Dict(self, node: ast.Dict) -> None:
        for key, value in zip(node.keys, node.values, strict=True):
            if isinstance(key, ast.Constant) and key.value == "blockOwnerDeletion" and _is_true(value):
                self._owner_reference(node, '"blockOwnerDeletion": True')
        self.generic_visit(node)

    def _owner_reference(self, node: ast.AST, what: str) -> None:
        group, plural = PRIMARY
        self.result.add((group, f"{plural}/finalizers", "update"), f"{self._line(node)}: {what}")


def _is_true(node: ast.expr) -> bool:
    return isinstance(node, ast.Constant) and node.value is True


def _is_none(node: ast.expr) -> bool:
    return isinstance(node, ast.Constant) and node.value is None


def _writes_status(function: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """A Kopf handler writes status when it returns a value (Kopf stores it in status.<handler id>) or touches
    ``patch.status`` / ``patch["status"]``."""
    for node in ast.walk(function):
        if isinstance(node, ast.Return) and node.value is not None and not _is_none(node.value):
            return True
        if isinstance(node, ast.Attribute) and node.attr == "status" and _dotted(node.value) == "patch":
            return True
        if (
            isinstance(node, ast.Subscript)
            and _dotted(node.value) == "patch"
            and isinstance(node.slice, ast.Constant)
            and node.slice.value == "status"
        ):
            return True
    return False


def _kopf_aliases(tree: ast.Module) -> set[str]:
    """Local names bound to the kopf module (``import kopf``, ``import kopf as k``)."""
    aliases = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            aliases |= {alias.asname or "kopf" for alias in node.names if alias.name == "kopf"}
    return aliases


def resource_names(crd_documents: Iterable[dict[str, Any]]) -> dict[str, tuple[str, str]]:
    """Every name a Kopf selector may use for a resource -> (group, plural): built-ins plus the given CRDs."""
    names = dict(BUILTIN_RESOURCES)
    for crd in crd_documents:
        spec = crd["spec"]
        target = (spec["group"], spec["names"]["plural"])
        for name in (
            spec["names"]["plural"],
            spec["names"]["kind"],
            spec["names"].get("singular"),
            *spec["names"].get("shortNames", []),
        ):
            if name:
                names[name] = target
    return names


def scan_sources(sources: dict[str, str], resources: dict[str, tuple[str, str]]) -> ScanResult:
    """Scan module texts (name -> source) as one package."""
    trees = {name: ast.parse(text, filename=name) for name, text in sources.items()}
    constants = _string_constants(trees.values())
    total = ScanResult()
    for name, tree in sorted(trees.items()):
        scanner = _ModuleScanner(name, tree, constants, resources)
        scanner.visit(tree)
        part = scanner.result
        for permission, places in part.evidence.items():
            for place in places:
                total.add(permission, place)
        total.unresolved += part.unresolved
        total.ambiguous += part.ambiguous
        total.kopf_handlers += part.kopf_handlers
    return total


def scan_tree(root: Path, resources: dict[str, tuple[str, str]]) -> ScanResult:
    """Scan every ``*.py`` under ``root``."""
    return scan_sources({str(p.relative_to(root)): p.read_text() for p in sorted(root.rglob("*.py"))}, resources)


def needed_permissions(result: ScanResult) -> set[Permission]:
    """What the operator needs: what its code shows, plus Kopf's own needs when it has Kopf handlers."""
    needed = set(result.permissions)
    if result.kopf_handlers:
        needed |= set(KOPF_IMPLICIT)
    return needed


def granted_permissions(documents: Iterable[dict[str, Any]], service_account: str) -> set[Permission]:
    """Every (group, resource, verb) that the rendered (Cluster)Roles bound to ``service_account`` grant.
    resourceNames restrictions are ignored: a rule limited to one name still grants that verb on the resource."""
    docs = list(documents)
    roles = {(d["kind"], d["metadata"]["name"]): d for d in docs if d.get("kind") in ("Role", "ClusterRole")}
    granted: set[Permission] = set()
    for binding in docs:
        if binding.get("kind") not in ("RoleBinding", "ClusterRoleBinding"):
            continue
        subjects = binding.get("subjects") or []
        if not any(s.get("kind") == "ServiceAccount" and s.get("name") == service_account for s in subjects):
            continue
        role = roles.get((binding["roleRef"]["kind"], binding["roleRef"]["name"]))
        for rule in (role or {}).get("rules") or []:
            granted |= set(_expand(rule))
    return granted


def _expand(rule: dict[str, Any]) -> Iterator[Permission]:
    for group in rule.get("apiGroups") or []:
        for resource in rule.get("resources") or []:
            for verb in rule.get("verbs") or []:
                yield (group, resource, verb)
