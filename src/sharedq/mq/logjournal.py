"""The queue manager's recovery log as its journal (``sharedq.seam.logjournal``).

What each change becomes: the record type after the redbook's Appendix B (a
:class:`~sharedq.mq.journal.ChangeKind`'s ``record_type``), and the queue manager's
meaning in the record's ``payload`` as ``{"mq": kind}``, for the pipeline:

=================  ===========  =========================================
change kind        record type  what it is
=================  ===========  =========================================
put                PUT          a message written with its uncommitted key
sync-put           MOVE         an out-of-syncpoint put took its committed key
commit-puts        MOVE         a unit's puts took their committed keys
get                READ         a message moved to the manager's get list
sync-get           DELETE       an out-of-syncpoint get removed the message
commit-gets        DELETE       a unit's gets (and own puts it got) removed
backout-puts       DELETE       a unit's puts removed at backout
backout-gets       UNLOCK       gotten messages back to their put lists
backout-last       UNLOCK       the last get's message back (not counted)
expire             MOVE         a gotten message to the expiry list
purge              DELETE       expired messages purged
cold-queue         MOVE         gotten messages to the cold queue (cold start)
requeue            MOVE         messages back from the cold queue
descriptor,        CHANGE       UOW descriptors, queue definitions, the
definition,                     group directory and list claims
control
=================  ===========  =========================================
"""

from __future__ import annotations

from collections.abc import Mapping

from sharedq.log import LogStream
from sharedq.mq.messages import message_facts
from sharedq.seam import logjournal

#: The key of the queue manager's words in its log records' payloads.
PAYLOAD_KEY = "mq"


class LogJournal(logjournal.LogJournal):
    """Logs a queue manager's changes to the log stream of each structure it uses.

    ``writer`` is the manager's name; ``streams`` the log stream of every structure it
    will connect to (a change to a structure with no stream is refused, not left
    unlogged).
    """

    def __init__(self, writer: str, streams: Mapping[str, LogStream]) -> None:
        super().__init__(writer, streams, payload_key=PAYLOAD_KEY, facts=message_facts)
