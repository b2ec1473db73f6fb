"""Shared queue managers: MQ-style queues shared through list structures.

The semantics of US 6,862,595 (IBM's shared queues in a coupling facility) on the
``sharedq.cf`` interface, so they run on every backend.  Queue managers of a
queue-sharing group put to and get from shared queues kept in list structures, in and
out of units of work, with two-phase commit, browse, get-wait, indexed queues, and
recovery of a failed manager's units of work by its peers.  See
``docs/queue-manager.md``.

::

    from sharedq.cf import StructureParams, open_facility
    from sharedq.mq import QueueManager, structure_params

    facility = open_facility("memory://")
    facility.create(structure_params("QSGADMIN"))
    with QueueManager(facility, "QM1", 1, admin="QSGADMIN") as qm:
        qm.define_queue("ORDERS", max_depth=1000)
        orders = qm.open("ORDERS")
        orders.put(b"hello", priority=5)
        with qm.unit_of_work() as uow:
            message = orders.get(uow=uow, wait=1.0)
"""

from sharedq.clock import Clock, SystemClock
from sharedq.mq.browse import Browser
from sharedq.mq.definitions import DepthEvents, Disposition, IndexType, QueueDefinition
from sharedq.mq.errors import (
    BackedOut,
    ConfigurationError,
    ConnectionBroken,
    Inhibited,
    InvalidArgument,
    JournalFailed,
    JournalFull,
    MessageTooBig,
    MQError,
    MQReason,
    NoMessageAvailable,
    NotAuthorized,
    NotOpenFor,
    OutcomePending,
    QueueExists,
    QueueFull,
    RecoveryInProgress,
    StorageFull,
    Truncated,
    UnknownQueue,
    UowError,
)
from sharedq.mq.event_messages import EVENT_QUEUE, DepthEvent, read_depth_event
from sharedq.mq.journal import ChangeKind
from sharedq.mq.logjournal import LogJournal
from sharedq.mq.manager import InDoubtUnit, QueueManager
from sharedq.mq.messages import ID_LENGTH, NO_ID, Message
from sharedq.mq.peer_recovery import ColdMessage, PeerRecoveryReport
from sharedq.mq.queue import Queue
from sharedq.mq.security import OpenFor
from sharedq.mq.sizing import structure_params
from sharedq.mq.uow import UnitOfWork, UowState

# What a journal given to ``QueueManager(journal=...)`` implements and receives.
from sharedq.seam.notes import BulkNote, ChangeNote, EntryMeaning, Journal

__all__ = [
    "EVENT_QUEUE",
    "ID_LENGTH",
    "NO_ID",
    "BackedOut",
    "Browser",
    "BulkNote",
    "ChangeKind",
    "ChangeNote",
    "Clock",
    "ColdMessage",
    "ConfigurationError",
    "ConnectionBroken",
    "DepthEvent",
    "DepthEvents",
    "Disposition",
    "EntryMeaning",
    "InDoubtUnit",
    "IndexType",
    "Inhibited",
    "InvalidArgument",
    "Journal",
    "JournalFailed",
    "JournalFull",
    "LogJournal",
    "MQError",
    "MQReason",
    "Message",
    "MessageTooBig",
    "NoMessageAvailable",
    "NotAuthorized",
    "NotOpenFor",
    "OpenFor",
    "OutcomePending",
    "PeerRecoveryReport",
    "Queue",
    "QueueDefinition",
    "QueueExists",
    "QueueFull",
    "QueueManager",
    "RecoveryInProgress",
    "StorageFull",
    "SystemClock",
    "Truncated",
    "UnitOfWork",
    "UnknownQueue",
    "UowError",
    "UowState",
    "read_depth_event",
    "structure_params",
]
