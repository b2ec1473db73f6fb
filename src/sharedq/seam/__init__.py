"""What every queue server shares below it: structure access, the journal, the log glue.

The queue manager (``sharedq.mq``) and the Common Queue Server are both servers on the
same list structures, log, checkpoints and recovery.  What they share of how a server
reaches them lives here, written against protocols the servers implement:

* :mod:`~sharedq.seam.access`: :class:`StructureAccess`, the one door to a structure
  (fault hook, quiesce gate, relocation to a copy, the journal);
* :mod:`~sharedq.seam.notes`: the journal seam, one typed note per list-structure
  request, and the :class:`Journal` base class;
* :mod:`~sharedq.seam.logjournal`: :class:`LogJournal`, a recovery log as the journal;
* :mod:`~sharedq.seam.recovery_log`: :class:`RecoveryLog`, a server's recovery log,
  checkpoints, structure recovery and restart decision over all its structures.
"""

from sharedq.seam.access import (
    FaultHook,
    JournalFailure,
    SimulatedFailure,
    StructureAccess,
    tolerating,
)
from sharedq.seam.logjournal import LogJournal
from sharedq.seam.notes import (
    About,
    BulkDeleteNote,
    BulkMoveNote,
    BulkNote,
    ChangeNote,
    ControlsNote,
    DecisionUncertain,
    DeleteNote,
    EntryMeaning,
    Journal,
    Meaning,
    MoveNote,
    Note,
    UpdateNote,
    WriteNote,
)
from sharedq.seam.recovery_log import RecoveryLog, ServerClient

__all__ = [
    "About",
    "BulkDeleteNote",
    "BulkMoveNote",
    "BulkNote",
    "ChangeNote",
    "ControlsNote",
    "DecisionUncertain",
    "DeleteNote",
    "EntryMeaning",
    "FaultHook",
    "Journal",
    "JournalFailure",
    "LogJournal",
    "Meaning",
    "MoveNote",
    "Note",
    "RecoveryLog",
    "ServerClient",
    "SimulatedFailure",
    "StructureAccess",
    "UpdateNote",
    "WriteNote",
    "tolerating",
]
