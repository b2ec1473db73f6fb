"""Where a structure lives in Redis: every key under one hash tag, ``sq:{NAME}:``.

The braces make Redis Cluster hash only ``NAME``, so all of a structure's keys share
one slot: one function sees and changes all of them atomically, and a cluster spreads
different structures over its nodes.  Structure names cannot contain braces.

Keys (``<n>`` a list number, ``<u>`` a user id):

=============  ==========  ===========================================================
``m``          hash        parameters; packed counters (``c``: seq, entries, elements,
                           EMCs and their maximums) and list controls (``L<n>``); user
                           names (``n<u>``); kept results (``q<u>:<channel>``)
``e``          hash        entry id -> entry record (key, list, version, adjunct...)
``d``          hash        entry id -> entry data, for entries that have data (kept
                           apart, so that a move or re-key never copies it)
``l:<n>``      sorted set  list ``n``: members key(16) ordinal(8) id(12), all score 0,
                           so that lexicographic order is the list's order
``s``          sorted set  secondary-key index: list(2) length(1) key member(36)
``k``          hash        lock table: lock number -> holder's user id
``w:<n>``      hash        monitors of list ``n``: monitor id -> monitor record
``um:<u>``     hash        a user's monitors: monitor id -> list number
``ud:<u>``     set         a user's monitors with a NONEMPTY event not yet taken
``q:<u>``      stream      a user's event queue (durable: written by the change)
``t:<u>``      string      a user's connection token; expires when its lease lapses
=============  ==========  ===========================================================
"""

from __future__ import annotations

#: The first part of every key sharedq writes.
PREFIX = "sq"
#: A SCAN pattern matching every structure's meta hash.
META_PATTERN = PREFIX + ":{*}:m"


def meta_key(name: str) -> str:
    """The key every function is called with for structure ``name`` (KEYS[1])."""
    return f"{PREFIX}:{{{name}}}:m"


def queue_key(name: str, user_id: int) -> str:
    """A user's event stream, which ``wait_events`` blocks on."""
    return f"{PREFIX}:{{{name}}}:q:{user_id}"


def name_of(meta: bytes | str) -> str:
    """The structure name in a meta key."""
    text = meta.decode("utf-8") if isinstance(meta, bytes) else meta
    return text[text.index("{") + 1 : text.index("}")]
