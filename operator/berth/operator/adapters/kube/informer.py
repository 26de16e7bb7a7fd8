"""``Informer``: one kind of object, in one namespace or in all, filtered server-side by a label selector (or one
object by name), kept in memory by list + watch (what client-go's informers do), and told to a callback change by
change.

Rules:

- List in pages (``limit``/``continue``), then watch from the list's ``resourceVersion`` with bookmarks, so that the
  resourceVersion to resume from keeps moving even while none of our objects changes.
- A watch that ends (the server's ``timeoutSeconds``, a dropped connection, a silent one past the client's
  timeout) is started again from the last resourceVersion seen: nothing is missed and nothing is listed again.
- ``410 Gone`` (the resourceVersion fell out of the server's window while the watch was away, or a paged list's
  ``continue`` expired) lists again; the new list is compared with what was kept, so objects deleted meanwhile
  are told as deletions.
- Any other failure backs off 0.5, 1, 2 ... 30 s and is logged once per episode; what was kept stays served
  meanwhile (stale, as a cache is; ``synced`` says whether it was ever complete).
- What is kept is ``project(object)``: the fields the operator reads. Memory stays small, and a change the operator
  does not read (a container's restart count, managedFields) is no change: ``on_change(old, new)`` is called only
  when the projection differs (None for an object that is not there).
- Objects that do not match the selector are ignored, whatever the server sent.
- An object the operator has just written can be kept as the server answered it (``put``), before its watch event
  arrives. A watch delivers an object's versions in order, so until the written version comes, what comes is
  older and leaves the written one kept; a version the watch brought already (or a newer one since) is not
  replaced by the write's answer, which is then the older. No resourceVersion is compared, only matched.
- :meth:`Informer.holds` says whether what is kept of an object is a given version or newer (the version was
  kept, or brought by the watch before what is kept now): a reader that knows a version from elsewhere (Kopf's
  watch) serves the cache only once it holds that version.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from berth.operator.adapters.kube.api_session import ApiSession, ApiStatusError

logger = logging.getLogger("berth.operator.watch")

Obj = dict[str, Any]
Key = tuple[str, str]  # (namespace, name)
OnChange = Callable[[Obj | None, Obj | None], None]

PAGE = 500
#: A watch asks the server to end it after 5 to 10 minutes (client-go's spread), so connections are renewed.
WATCH_TIMEOUT_S = (300, 600)
#: How long past the server's timeout a silent stream is given up on.
CLIENT_MARGIN_S = 30.0
BACKOFF_S = (0.5, 30.0)
#: The versions of each object the watch brought last (what a write's answer is matched against).
VERSIONS_KEPT = 8


@dataclass(frozen=True, slots=True)
class WatchedResource:
    """A kind of object the operator lists and watches (``tests/support/control_plane/rbac_scan.py`` reads these
    declarations to derive the list and watch permissions the operator needs, so each is made of string constants)."""

    group: str  # "" for the core API
    version: str
    plural: str

    def path(self, namespace: str | None) -> str:
        base = f"/api/{self.version}" if not self.group else f"/apis/{self.group}/{self.version}"
        return f"{base}/namespaces/{namespace}/{self.plural}" if namespace else f"{base}/{self.plural}"

    def __str__(self) -> str:
        return f"{self.plural}.{self.group}" if self.group else self.plural


class Gone(Exception):
    """The server no longer has what was asked for (410): list again."""


def key_of(obj: Mapping[str, Any]) -> Key:
    metadata = obj.get("metadata") or {}
    return str(metadata.get("namespace") or ""), str(metadata.get("name") or "")


def parse_selector(selector: str) -> list[tuple[str, str | None]]:
    """``a=b,c`` -> [("a", "b"), ("c", None)]: equality and existence terms (all this module sends)."""
    terms: list[tuple[str, str | None]] = []
    for term in filter(None, (part.strip() for part in selector.split(","))):
        name, equals, value = term.partition("=")
        terms.append((name.strip(), value.strip() if equals else None))
    return terms


def matches(obj: Mapping[str, Any], terms: list[tuple[str, str | None]]) -> bool:
    labels = (obj.get("metadata") or {}).get("labels") or {}
    return all(name in labels and (value is None or labels[name] == value) for name, value in terms)


class Informer:
    def __init__(
        self,
        api: ApiSession,
        resource: WatchedResource,
        *,
        namespace: str | None,
        selector: str,
        project: Callable[[Obj], Obj],
        on_change: OnChange,
        on_relist: Callable[[str], None] | None = None,
        name: str | None = None,
    ) -> None:
        self.api = api
        self.resource = resource
        self.namespace = namespace
        self.selector = selector
        #: Only the object of this name (a field selector, which RBAC's ``resourceNames`` accepts for list and watch).
        self.name = name
        self._terms = parse_selector(selector)
        self.project = project
        self.on_change = on_change
        self.on_relist = on_relist or (lambda reason: None)
        self.objects: dict[Key, Obj] = {}
        self._versions: dict[Key, deque[str]] = {}  # the last versions of each object the watch (or a list) brought
        self._awaited: dict[Key, tuple[str, int]] = {}  # a written version not brought yet, and the older ones since
        self.synced = asyncio.Event()
        self.resource_version: str | None = None
        self._task: asyncio.Task[None] | None = None

    def get(self, namespace: str, name: str) -> Obj | None:
        return self.objects.get((namespace, name))

    def holds(self, namespace: str, name: str, version: str) -> bool:
        """Whether what is kept of the object is ``version`` or newer: the version of a write's answer kept, or one
        the watch (or a list) brought, which what is kept now comes after (an object's versions come in order)."""
        key = (namespace, name)
        if key not in self.objects:
            return False
        awaited = self._awaited.get(key)
        return version in self._versions.get(key, ()) or (awaited is not None and awaited[0] == version)

    def last_version(self, namespace: str, name: str) -> str | None:
        """The version of the object the watch (or a list) brought last; None when none was."""
        versions = self._versions.get((namespace, name))
        return versions[-1] if versions else None

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self.run(), name=f"watch {self.resource}")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def run(self) -> None:
        failures = 0
        while True:
            try:
                if self.resource_version is None:
                    await self.relist("start" if not self.synced.is_set() else "expired")
                await self.watch()
                failures = self._recovered(failures)
            except asyncio.CancelledError:
                raise
            except Gone:
                logger.info("the watch of %s expired (410 Gone): listing again", self.resource)
                self.resource_version = None
            except Exception as error:
                if failures == 0:
                    logger.warning("watching %s failed (%s); retrying with backoff", self.resource, error)
                failures += 1
                low, high = BACKOFF_S
                await asyncio.sleep(min(high, low * 2 ** min(failures - 1, 8)))

    def _recovered(self, failures: int) -> int:
        if failures:
            logger.info("watching %s again", self.resource)
        return 0

    def _selecting(self) -> dict[str, str]:
        params = {"labelSelector": self.selector} if self.selector else {}
        if self.name is not None:
            params["fieldSelector"] = f"metadata.name={self.name}"
        return params

    async def relist(self, reason: str) -> None:
        """List everything (in pages) and replace what is kept with it, telling every difference."""
        items: dict[Key, Obj] = {}
        versions: dict[Key, str | None] = {}
        params = {**self._selecting(), "limit": str(PAGE)}
        while True:
            try:
                page = await self.api.get_json(self.resource.path(self.namespace), params)
            except ApiStatusError as error:
                if error.status == 410:  # the continue token expired: start the list over
                    params.pop("continue", None)
                    items.clear()
                    versions.clear()
                    continue
                raise
            for item in page.get("items") or []:
                if matches(item, self._terms):
                    items[key_of(item)] = self.project(item)
                    versions[key_of(item)] = _version(item)
            metadata = page.get("metadata") or {}
            if not metadata.get("continue"):
                break
            params["continue"] = str(metadata["continue"])
        previous, self.objects = self.objects, items
        self._versions = {key: deque([v], maxlen=VERSIONS_KEPT) for key, v in versions.items() if v is not None}
        self._awaited.clear()
        self.resource_version = str(metadata.get("resourceVersion") or "") or None
        for key, gone in previous.items():
            if key not in items:
                self.on_change(gone, None)
        for key, new in items.items():
            if previous.get(key) != new:
                self.on_change(previous.get(key), new)
        self.synced.set()
        self.on_relist(reason)

    async def watch(self) -> None:
        """One watch request from the last resourceVersion, until the server ends it."""
        timeout = random.randint(*WATCH_TIMEOUT_S)
        params = {
            "watch": "true",
            "allowWatchBookmarks": "true",
            **self._selecting(),
            "timeoutSeconds": str(timeout),
        }
        if self.resource_version:
            params["resourceVersion"] = self.resource_version
        try:
            stream = self.api.stream(self.resource.path(self.namespace), params, timeout_s=timeout + CLIENT_MARGIN_S)
            async for event in stream:
                self.handle(event)
        except ApiStatusError as error:
            if error.status == 410:
                raise Gone(str(error)) from error
            raise
        except TimeoutError:
            pass  # silent for longer than the server's own timeout: watch again from where we are

    def put(self, obj: Mapping[str, Any]) -> tuple[Obj | None, Obj] | None:
        """``obj``, as the server answered a write, kept as if a watch event had brought it, without telling anyone:
        ``(old, new)`` when that changed what is kept, else None (an object outside the selector, or a version the
        watch brought already, is left alone)."""
        if not matches(obj, self._terms):
            return None
        key, version = key_of(obj), _version(obj)
        if version is not None and version in self._versions.get(key, ()):
            return None
        old, new = self.objects.get(key), self.project(dict(obj))
        self.objects[key] = new
        if version is not None:
            self._awaited[key] = (version, 0)
        return (old, new) if old != new else None

    def _older_than_written(self, key: Key, version: str | None, deleted: bool) -> bool:
        """Whether a watch event of ``key`` comes before the version a write's answer put there (and is skipped)."""
        if version is not None:
            self._versions.setdefault(key, deque(maxlen=VERSIONS_KEPT)).append(version)
        awaited = self._awaited.get(key)
        if awaited is None:
            return False
        written, skipped = awaited
        if version == written or deleted or skipped >= VERSIONS_KEPT:
            del self._awaited[key]
            return False
        self._awaited[key] = (written, skipped + 1)
        return True

    def handle(self, event: Mapping[str, Any]) -> None:
        """One watch event: the store updated and the change told, a bookmark's resourceVersion kept."""
        kind = event.get("type")
        obj = event.get("object") or {}
        if kind == "ERROR":
            code = obj.get("code")
            if code == 410:
                raise Gone(str(obj.get("message") or "410 Gone"))
            raise ApiStatusError(int(code or 500), str(obj.get("message") or obj))
        version = (obj.get("metadata") or {}).get("resourceVersion")
        if kind == "BOOKMARK":
            self.resource_version = str(version) if version else self.resource_version
            return
        if kind not in ("ADDED", "MODIFIED", "DELETED"):
            return
        if version:
            self.resource_version = str(version)
        key = key_of(obj)
        if self._older_than_written(key, str(version) if version else None, kind == "DELETED"):
            return
        old = self.objects.get(key)
        new: Obj | None
        if kind == "DELETED" or not matches(obj, self._terms):  # a label removed takes it out of our view
            new = None
            self.objects.pop(key, None)
            if kind == "DELETED":
                self._versions.pop(key, None)
        else:
            new = self.project(obj)
            self.objects[key] = new
        if old != new:
            self.on_change(old, new)


def _version(obj: Mapping[str, Any]) -> str | None:
    version = (obj.get("metadata") or {}).get("resourceVersion")
    return str(version) if version else None
