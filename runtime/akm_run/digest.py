"""Tagged hashes: `sha256:` + the hex SHA-256 of some bytes, and the canonical JSON they are taken over."""

from __future__ import annotations

import hashlib
from typing import Any

import canonicaljson

TAG = "sha256:"


def tagged_sha256(data: bytes) -> str:
    """`sha256:` + the hex SHA-256 of `data` (the form of every hash in a plan and its read set)."""
    return TAG + hashlib.sha256(data).hexdigest()


def canonical_bytes(value: Any) -> bytes:
    """The canonical JSON encoding that hashes are taken over."""
    encoded: bytes = canonicaljson.encode_canonical_json(value)
    return encoded
