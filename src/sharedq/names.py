"""The rules for names, one per kind of name, in one place.

A name given to sharedq ends up somewhere that cannot take any string: a structure's
name becomes a Redis key's hash tag and a directory under the recovery root, a
server's name (a queue manager's) becomes its log writer's directory, its data sets'
file names and its checkpoint file's name.  So each kind of name has one rule, checked
with a full match (a trailing newline is not a name), in ASCII only (a Unicode name
that one file system normalises and another does not would be two names), and never
``.`` or ``..`` (a directory of its own, or the one above the root).

This module sits at the bottom of the layers, beside :mod:`sharedq.errors`, and
raises nothing: :meth:`NameRule.problem` says what is wrong with a name, and each
layer raises its own bad-argument error with that text (``InvalidRequest`` in
``sharedq.cf``, ``InvalidLogRequest`` in ``sharedq.log``, ...).  Every layer that
takes a name of a kind asks the same rule, so a name one layer accepts, the others
accept too.

The rules (``docs/list-structures.md`` and ``docs/queue-manager.md``, "Names and
limits", say the same for operators):

* :data:`STRUCTURE`: 1 to 16 of ``A-Z a-z 0-9 _ $ # @ .``, starting with a letter, a
  digit or ``$ # @`` (a CFRM structure name's characters).
* :data:`SERVER`: a queue manager's (or any server's) name, which is also its log
  writer's and its checkpoint file's: 1 to 48 of ``A-Z a-z 0-9 _ . @ $ -``, starting
  with a letter or a digit (Spark skips files whose names start with ``_`` or ``.``).
* :data:`QUEUE`: MQ's object names, 1 to 48 of ``A-Z a-z 0-9 . / _ %``; names that
  start with ``SYSTEM.`` are the queue manager's own (its cold queue) and cannot be
  defined.
* :data:`STREAM`: a log stream's name (the LOGR ``LOGNAME``), 1 to 64 of
  ``A-Z a-z 0-9 _ $ # @ . -``, starting with a letter, a digit or ``$ # @``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["QUEUE", "RESERVED_QUEUE_PREFIX", "SERVER", "STREAM", "STRUCTURE", "NameRule"]


@dataclass(frozen=True)
class NameRule:
    """One kind of name: which characters, how many, and what a name may start with.

    Attributes:
        kind: what the name names, for messages ("structure name").
        first: the characters a name may start with (a regular-expression class body).
        rest: the characters that may follow.
        max_length: the most characters a name may have.
        described: the rule in words, for messages and documentation.
        reserved_prefix: a prefix that names only what sharedq itself defines;
            refused by :meth:`problem` when ``new`` is true.
    """

    kind: str
    first: str
    rest: str
    max_length: int
    described: str
    reserved_prefix: str | None = None

    @property
    def pattern(self) -> re.Pattern[str]:
        """The rule as a regular expression (use ``fullmatch``)."""
        return re.compile(f"[{self.first}][{self.rest}]{{0,{self.max_length - 1}}}")

    def problem(self, name: object, *, new: bool = False, kind: str | None = None) -> str | None:
        """What is wrong with ``name``, as a sentence that names it; ``None`` if nothing.

        ``new``: the name is for something being defined, so a reserved prefix is
        refused too.  ``kind`` replaces the rule's own word for the name where the
        caller has a closer one (a queue manager's name is a server name).  The
        sentence ends with the rule, so that a message built from it tells the user
        what to give instead.
        """
        kind = kind or self.kind
        what = self._what_is_wrong(name, new, kind)
        return None if what is None else f"{what}; {kind}s are {self.described}"

    def is_valid(self, name: object, *, new: bool = False) -> bool:
        """Whether ``name`` keeps the rule (and, when ``new``, avoids the reserved prefix)."""
        return self.problem(name, new=new) is None

    def _what_is_wrong(self, name: object, new: bool, kind: str) -> str | None:
        if not isinstance(name, str):
            return f"{kind} must be a string, not {type(name).__name__}"
        if not name:
            return f"{kind} is empty"
        if name in (".", ".."):
            return f"{kind} {name!r} names a directory, not a {kind}"
        if len(name) > self.max_length:
            return f"{kind} {name!r} has {len(name)} characters, more than {self.max_length}"
        if not name.isascii():
            return f"{kind} {name!r} has characters outside ASCII"
        if re.fullmatch(f"[{self.first}]", name[0]) is None:
            return f"{kind} {name!r} starts with {name[0]!r}"
        bad = sorted({c for c in name[1:] if re.fullmatch(f"[{self.rest}]", c) is None})
        if bad:
            shown = ", ".join(repr(c) for c in bad)
            return f"{kind} {name!r} has characters not allowed: {shown}"
        if new and self.reserved_prefix is not None and name.startswith(self.reserved_prefix):
            return (
                f"{kind} {name!r} starts with {self.reserved_prefix}, which names only the "
                f"queue manager's own objects (its cold queue) and cannot be defined"
            )
        assert self.pattern.fullmatch(name), name  # the checks above are the pattern's
        return None


#: What only the queue manager may name a queue with: its cold queue is
#: ``SYSTEM.COLD.QUEUE`` (MQ reserves ``SYSTEM.`` for its own objects).
RESERVED_QUEUE_PREFIX = "SYSTEM."

STRUCTURE = NameRule(
    "structure name",
    first="A-Za-z0-9$#@",
    rest="A-Za-z0-9_$#@.",
    max_length=16,
    described="1 to 16 of A-Z a-z 0-9 _ $ # @ . starting with a letter, a digit, $, # or @",
)
SERVER = NameRule(
    "server name",
    first="A-Za-z0-9",
    rest="A-Za-z0-9_.@$-",
    max_length=48,
    described="1 to 48 of A-Z a-z 0-9 _ . @ $ - starting with a letter or a digit",
)
QUEUE = NameRule(
    "queue name",
    first="A-Za-z0-9._/%",
    rest="A-Za-z0-9._/%",
    max_length=48,
    described="1 to 48 of A-Z a-z 0-9 . / _ %",
    reserved_prefix=RESERVED_QUEUE_PREFIX,
)
STREAM = NameRule(
    "stream name",
    first="A-Za-z0-9$#@",
    rest="A-Za-z0-9_$#@.-",
    max_length=64,
    described="1 to 64 of A-Z a-z 0-9 _ $ # @ . - starting with a letter, a digit, $, # or @",
)
