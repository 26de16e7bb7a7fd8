"""Bearer tokens scoped to groups (docs/api.md §10 ``--tokens-file``).

A tokens file (YAML or JSON) lists ``{"token", "groups": [glob...], "admin": bool}``. Presented tokens are
compared by SHA-256 digest with ``hmac.compare_digest``, so neither timing nor logs ever expose a token;
only a short, non-reversible fingerprint (``tok-1a2b3c4d``) may be logged. Group patterns are ``fnmatch``
globs (``*`` also matches ``/``). Admin tokens may use every route and group.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

import yaml


class TokensFileError(ValueError):
    pass


@dataclass(frozen=True, slots=True)
class Principal:
    digest: bytes
    fingerprint: str
    groups: tuple[str, ...]
    admin: bool

    def may_use_group(self, group_id: str) -> bool:
        return self.admin or any(fnmatchcase(group_id, pattern) for pattern in self.groups)


def _digest(token: str) -> bytes:
    return hashlib.sha256(token.encode("utf-8")).digest()


class TokenSet:
    def __init__(self, entries: list[tuple[str, tuple[str, ...], bool]]) -> None:
        self._by_digest: dict[bytes, Principal] = {}
        for token, groups, admin in entries:
            digest = _digest(token)
            self._by_digest[digest] = Principal(digest, f"tok-{digest.hex()[:8]}", groups, admin)

    def __len__(self) -> int:
        return len(self._by_digest)

    def authenticate(self, authorization: str | None) -> Principal | None:
        """The principal of an ``Authorization: Bearer TOKEN`` header, or None."""
        if not authorization:
            return None
        scheme, _, token = authorization.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            return None
        digest = _digest(token.strip())
        # Looked up by digest, so lookup timing can only reveal digest bytes, never token bytes; the final
        # comparison is constant-time all the same.
        principal = self._by_digest.get(digest)
        if principal is None or not hmac.compare_digest(principal.digest, digest):
            return None
        return principal

    @classmethod
    def from_file(cls, path: Path) -> TokenSet:
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise TokensFileError(f"cannot read tokens file {path}: {exc.strerror or exc}") from None
        try:
            data: Any = json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
        except (ValueError, yaml.YAMLError) as exc:
            raise TokensFileError(f"tokens file {path} is not valid YAML/JSON: {str(exc).splitlines()[0]}") from None
        return cls.from_document(data, str(path))

    @classmethod
    def from_document(cls, data: Any, source: str = "tokens") -> TokenSet:
        if not isinstance(data, dict) or not isinstance(data.get("tokens"), list):
            raise TokensFileError(f"{source}: expected an object with a 'tokens' list")
        entries = []
        for i, item in enumerate(data["tokens"]):
            where = f"{source}: tokens[{i}]"
            if not isinstance(item, dict):
                raise TokensFileError(f"{where}: must be an object")
            token = item.get("token")
            if not isinstance(token, str) or len(token) < 8 or token != token.strip():
                raise TokensFileError(f"{where}.token: must be a string of at least 8 characters without spaces")
            groups = item.get("groups", [])
            if not isinstance(groups, list) or not all(isinstance(g, str) for g in groups):
                raise TokensFileError(f"{where}.groups: must be a list of glob strings")
            admin = item.get("admin", False)
            if not isinstance(admin, bool):
                raise TokensFileError(f"{where}.admin: must be true or false")
            entries.append((token, tuple(groups), admin))
        if not entries:
            raise TokensFileError(f"{source}: the tokens list is empty, nobody could use the coordinator")
        if len({_digest(t) for t, _, _ in entries}) != len(entries):
            raise TokensFileError(f"{source}: the same token is listed twice")
        return cls(entries)
