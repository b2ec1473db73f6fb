"""Open a coupling facility by URL: ``memory`` (the default) or a Redis URL."""

from __future__ import annotations

import importlib

from sharedq.cf.api import CouplingFacility
from sharedq.cf.errors import CFReason, cf_error

#: The facility used when none is named: structures in this process's memory.
DEFAULT_FACILITY_URL = "memory://"


def open_facility(url: str = DEFAULT_FACILITY_URL) -> CouplingFacility:
    """A facility for ``url``.

    ``memory://`` (or ``memory``) gives a new, empty in-process facility: callers that
    want several users on the same structures must share the returned object.
    ``redis://``, ``rediss://`` and ``unix://`` URLs give the Redis backend, which
    needs the ``redis`` extra (``pip install 'sharedq[redis]'``).
    """
    scheme = url.split(":", 1)[0].lower() if ":" in url else url.lower()
    if scheme == "memory":
        from sharedq.cf.memory import MemoryFacility

        return MemoryFacility()
    if scheme in ("redis", "rediss", "unix"):
        try:
            backend = importlib.import_module("sharedq.cf.redis")
        except ImportError as exc:  # pragma: no cover - depends on the installed extras
            raise cf_error(
                CFReason.BAD_URL,
                f"the Redis backend needs the redis extra: pip install 'sharedq[redis]' ({exc})",
            ) from None
        facility: CouplingFacility = backend.RedisFacility.from_url(url)
        return facility
    raise cf_error(
        CFReason.BAD_URL,
        f"unknown facility URL {url!r}: use memory://, redis://, rediss:// or unix://",
    )
