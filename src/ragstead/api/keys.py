"""API keys: random bearer tokens, stored only as SHA-256 hashes, each bound to one user slug and scopes.

Why plain SHA-256 (no salt, no slow KDF): docs/design.md, "API keys and limits".
"""

from __future__ import annotations

import hashlib
import json
import secrets
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from ragstead.core.atomic import make_private_folder, write_text_atomically
from ragstead.errors import ConfigError
from ragstead.filters import USER_SLUG

SCOPES = ("query", "ask", "upload", "delete")
KEY_PREFIX = "rsk_"


@dataclass(frozen=True)
class ApiKey:
    """One key as stored: never the key itself, only its hash."""

    key_id: str
    key_hash: str
    user_slug: str
    scopes: tuple[str, ...]
    created_at: str
    label: str = ""
    revoked: bool = field(default=False)

    def to_dict(self) -> dict[str, object]:
        """What `ragstead keys list` shows (no hash)."""
        data = asdict(self)
        data.pop("key_hash")
        data["scopes"] = list(self.scopes)
        return data


def hash_key(key: str) -> str:
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


class KeyFile:
    """The key table in `<index folder>/api_keys.json` (mode 0600), re-read when it changes on disk."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._by_hash: dict[str, ApiKey] = {}
        self._mtime: float | None = None

    def _load(self) -> list[ApiKey]:
        if not self.path.exists():
            return []
        try:
            raw = json.loads(self.path.read_text(encoding="utf-8"))
            return [ApiKey(**{**k, "scopes": tuple(k["scopes"])}) for k in raw["keys"]]
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise ConfigError(f"cannot read the API key file {self.path}: {exc}") from exc

    def _save(self, keys: list[ApiKey]) -> None:
        make_private_folder(self.path.parent)  # 0700 when created here (the index folder, normally)
        payload = json.dumps({"keys": [{**asdict(k), "scopes": list(k.scopes)} for k in keys]}, indent=2)
        write_text_atomically(self.path, payload)  # mode 0600: only the owner may read key hashes

    def add(self, user_slug: str, scopes: list[str] | tuple[str, ...] = SCOPES, label: str = "") -> tuple[str, ApiKey]:
        """Create a key for `user_slug`; returns (the key, shown once; its stored record)."""
        if not USER_SLUG.match(user_slug):
            raise ConfigError(f"user must be a slug of letters, digits, '.', '_' or '-', got {user_slug!r}")
        unknown = [s for s in scopes if s not in SCOPES]
        if unknown or not scopes:
            raise ConfigError(f"unknown or no scopes {unknown}; choose from {list(SCOPES)}")
        key = KEY_PREFIX + secrets.token_urlsafe(32)
        record = ApiKey(
            key_id=f"k_{secrets.token_hex(4)}",
            key_hash=hash_key(key),
            user_slug=user_slug,
            scopes=tuple(dict.fromkeys(scopes)),
            created_at=datetime.now(UTC).isoformat(timespec="seconds"),
            label=label,
        )
        self._save([*self._load(), record])
        return key, record

    def revoke(self, key_id: str) -> ApiKey:
        """Mark a key revoked (kept for the record); it stops working at the server's next request."""
        keys = self._load()
        match = [k for k in keys if k.key_id == key_id]
        if not match:
            raise ConfigError(f"no API key with id {key_id!r}")
        revoked = ApiKey(**{**asdict(match[0]), "revoked": True})
        self._save([revoked if k.key_id == key_id else k for k in keys])
        return revoked

    def list(self) -> list[ApiKey]:
        return self._load()

    def lookup(self, key: str) -> ApiKey | None:
        """The live record for a presented key, or None (unknown or revoked)."""
        mtime = self.path.stat().st_mtime if self.path.exists() else None
        if mtime != self._mtime:
            self._by_hash = {k.key_hash: k for k in self._load()}
            self._mtime = mtime
        found = self._by_hash.get(hash_key(key))
        return None if found is None or found.revoked else found
