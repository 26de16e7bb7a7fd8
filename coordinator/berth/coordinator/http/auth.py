"""Bearer tokens: who they are, which groups and routes they may use (docs/api.md §10 "Tokens").

A tokens file (YAML or JSON) lists ``{"name", "token", "groups": [glob...], "admin": bool, "scopes": [...]}``.
Rules:

- Presented tokens are compared by SHA-256 digest with ``hmac.compare_digest``; a token is never logged, nor any
  part or digest of it. What the coordinator says about a token (in logs, 403 messages and the journal's
  ``actor``) is its ``name``: unique in the file, 1-64 of ``[A-Za-z0-9._-]``; an unnamed token is called after its
  place in the file, ``tokens[2]``.
- Group patterns are ``fnmatch`` globs (``*`` also matches ``/``). An admin token may use every route and group.
- Scopes grant single routes without making a token admin: ``journal:read`` reads ``GET /v1/journal`` (the
  analytics job's token), and nothing else that an admin token could.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
from dataclasses import dataclass
from enum import StrEnum
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

import yaml

#: Scopes a token may carry besides its groups (docs/api.md §10).
JOURNAL_READ = "journal:read"
SCOPES = frozenset({JOURNAL_READ})

_NAME = re.compile(r"^[A-Za-z0-9._-]{1,64}$")


class TokensFileError(ValueError):
    pass


class AuthFailure(StrEnum):
    """Why a request's credentials were refused (the ``reason`` label of ``berth_auth_failures_total``)."""

    MISSING = "missing"  # no Authorization header
    MALFORMED = "malformed"  # not "Bearer <token>"
    UNKNOWN = "unknown"  # a bearer token nobody listed
    FORBIDDEN = "forbidden"  # a valid token, on a group or route it may not use


@dataclass(frozen=True, slots=True)
class Principal:
    name: str
    digest: bytes
    groups: tuple[str, ...]
    admin: bool
    scopes: frozenset[str] = frozenset()

    def may_use_group(self, group_id: str) -> bool:
        return self.admin or any(fnmatchcase(group_id, pattern) for pattern in self.groups)

    def has_scope(self, scope: str) -> bool:
        return self.admin or scope in self.scopes


@dataclass(frozen=True, slots=True)
class TokenEntry:
    token: str
    name: str
    groups: tuple[str, ...] = ()
    admin: bool = False
    scopes: frozenset[str] = frozenset()


def _digest(token: str) -> bytes:
    return hashlib.sha256(token.encode("utf-8")).digest()


class TokenSet:
    def __init__(self, entries: list[TokenEntry]) -> None:
        self._by_digest: dict[bytes, Principal] = {}
        for entry in entries:
            digest = _digest(entry.token)
            self._by_digest[digest] = Principal(entry.name, digest, entry.groups, entry.admin, entry.scopes)

    def __len__(self) -> int:
        return len(self._by_digest)

    def identify(self, authorization: str | None) -> Principal | AuthFailure:
        """The principal of an ``Authorization: Bearer TOKEN`` header, or why there is none."""
        if not authorization:
            return AuthFailure.MISSING
        scheme, _, token = authorization.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            return AuthFailure.MALFORMED
        digest = _digest(token.strip())
        # Looked up by digest, so lookup timing can only reveal digest bytes, never token bytes; the final
        # comparison is constant-time all the same.
        principal = self._by_digest.get(digest)
        if principal is None or not hmac.compare_digest(principal.digest, digest):
            return AuthFailure.UNKNOWN
        return principal

    def authenticate(self, authorization: str | None) -> Principal | None:
        """The principal of an ``Authorization: Bearer TOKEN`` header, or None."""
        found = self.identify(authorization)
        return found if isinstance(found, Principal) else None

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
        entries = [_entry(item, i, f"{source}: tokens[{i}]") for i, item in enumerate(data["tokens"])]
        if not entries:
            raise TokensFileError(f"{source}: the tokens list is empty, nobody could use the coordinator")
        if len({_digest(e.token) for e in entries}) != len(entries):
            raise TokensFileError(f"{source}: the same token is listed twice")
        names = [e.name for e in entries]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise TokensFileError(f"{source}: the name {twice[0]!r} is given to more than one token")
        return cls(entries)


def _entry(item: Any, index: int, where: str) -> TokenEntry:
    if not isinstance(item, dict):
        raise TokensFileError(f"{where}: must be an object")
    token = item.get("token")
    if not isinstance(token, str) or len(token) < 8 or token != token.strip():
        raise TokensFileError(f"{where}.token: must be a string of at least 8 characters without spaces")
    name = item.get("name", f"tokens[{index}]")
    if not isinstance(name, str) or not (_NAME.match(name) or name == f"tokens[{index}]"):
        raise TokensFileError(f"{where}.name: must be 1 to 64 characters of [A-Za-z0-9._-]")
    groups = item.get("groups", [])
    if not isinstance(groups, list) or not all(isinstance(g, str) for g in groups):
        raise TokensFileError(f"{where}.groups: must be a list of glob strings")
    admin = item.get("admin", False)
    if not isinstance(admin, bool):
        raise TokensFileError(f"{where}.admin: must be true or false")
    scopes = item.get("scopes", [])
    if not isinstance(scopes, list) or not all(isinstance(s, str) for s in scopes):
        raise TokensFileError(f"{where}.scopes: must be a list of scopes ({', '.join(sorted(SCOPES))})")
    unknown = sorted(set(scopes) - SCOPES)
    if unknown:
        raise TokensFileError(f"{where}.scopes: unknown scope {unknown[0]!r} (known: {', '.join(sorted(SCOPES))})")
    return TokenEntry(token, name, tuple(groups), admin, frozenset(scopes))
