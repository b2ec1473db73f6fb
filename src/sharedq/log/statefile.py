"""Small state files that check themselves: JSON with a digest, replaced atomically.

The log and the recovery machinery keep a handful of small files beside the records
(the stream's identity, the retention points and what retention deleted, each
writer's state, each server's system checkpoint, a recovery in progress).  A damaged
one must never be read as something else: a retention point read as garbage could
delete records recovery needs, a writer state read wrongly could hide a gap.  So each
is written as ``{"body": {...}, "sha256": "<hex digest of the body>"}``, the body
serialized canonically (sorted keys, no spaces), and a reader verifies the digest
before trusting a byte of it; a file that does not verify raises ``LOG_DAMAGED``
naming the file and what is wrong with it.

Writing goes through :func:`sharedq.log.layout.write_atomically` (temporary name,
fsync, rename, fsync of the directory), so a reader sees the old file or the new one,
never half of either.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from sharedq.log.errors import LogReason, log_error
from sharedq.log.layout import write_atomically


def encode_state(body: dict[str, Any]) -> bytes:
    """The bytes of a state file holding ``body``."""
    canonical = _canonical(body)
    digest = hashlib.sha256(canonical).hexdigest()
    return b'{"body":' + canonical + b',"sha256":"' + digest.encode() + b'"}\n'


def decode_state(data: bytes, path: Path) -> dict[str, Any]:
    """The body of a state file's bytes, verified; ``LOG_DAMAGED`` naming ``path`` if not."""
    try:
        outer = json.loads(data)
    except ValueError as exc:
        raise _damaged(path, f"not JSON ({exc})") from None
    if not isinstance(outer, dict) or set(outer) != {"body", "sha256"}:
        raise _damaged(path, "not a sharedq state file (no body and digest)")
    body = outer["body"]
    if not isinstance(body, dict):
        raise _damaged(path, "its body is not an object")
    digest = hashlib.sha256(_canonical(body)).hexdigest()
    if digest != outer["sha256"]:
        raise _damaged(path, f"digest {digest} does not match the {outer['sha256']!r} it carries")
    return body


def write_state(path: Path, body: dict[str, Any]) -> None:
    """Replace the state file at ``path`` with ``body``, durably and atomically."""
    write_atomically(path, encode_state(body))


def read_state(path: Path) -> dict[str, Any] | None:
    """The verified body of the state file at ``path``; ``None`` when there is none."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise log_error(LogReason.IO_FAILED, f"cannot read {path}: {exc}", path=str(path)) from exc
    return decode_state(data, path)


def _canonical(body: dict[str, Any]) -> bytes:
    return json.dumps(body, sort_keys=True, separators=(",", ":")).encode()


def _damaged(path: Path, why: str) -> Exception:
    return log_error(
        LogReason.LOG_DAMAGED,
        f"state file {path} is damaged: {why}",
        path=str(path),
        damage_reason="bad state file",
    )
