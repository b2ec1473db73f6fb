"""The embedded backend: structures in this process's memory, shared by its threads.

This is the default.  Every queue manager of a queue-sharing group that runs in one
process (the demo, most tests) connects to the same :class:`MemoryFacility` object; it
holds structures until they are deleted, whether or not anyone is connected, exactly as
a coupling facility does, but only for the life of the process.
"""

from __future__ import annotations

import threading

from sharedq.cf.api import CouplingFacility
from sharedq.cf.errors import CFReason, cf_error
from sharedq.cf.memory.connection import MemoryListStructure
from sharedq.cf.memory.structure import MemoryStructure
from sharedq.cf.params import StructureParams
from sharedq.cf.types import StructureStats, UserState


class MemoryFacility(CouplingFacility):
    """Structures in this process's memory; thread-safe, for any number of users."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._structures: dict[str, MemoryStructure] = {}

    def __repr__(self) -> str:
        return f"<MemoryFacility structures={self.structure_names()}>"

    def create(self, params: StructureParams, *, sequence_floor: int = 0) -> StructureStats:
        structure = MemoryStructure(params, sequence_floor)
        with self._lock:
            if params.name in self._structures:
                raise cf_error(CFReason.STRUCTURE_EXISTS, f"structure {params.name} exists already")
            self._structures[params.name] = structure
        return structure.statistics()

    def delete(self, name: str, *, force: bool = False) -> None:
        with self._lock:
            structure = self._get(name)
            with structure.lock:
                active = [u.name for u in structure.user_infos() if u.state is UserState.ACTIVE]
                if active and not force:
                    raise cf_error(
                        CFReason.USER_ACTIVE,
                        f"structure {name} has users connected: {', '.join(active)}",
                    )
                structure.deleted = True
                for user in structure.users.values():
                    user.live = 0
                    user.condition.notify_all()
            del self._structures[name]

    def exists(self, name: str) -> bool:
        with self._lock:
            return name in self._structures

    def structure_names(self) -> list[str]:
        with self._lock:
            return sorted(self._structures)

    def connect(self, name: str, user_name: str) -> MemoryListStructure:
        with self._lock:
            structure = self._get(name)
        with structure.lock:
            user = structure.attach(user_name)
            return MemoryListStructure(structure, user, user.incarnation)

    def close(self) -> None:
        """Nothing to release: the structures live as long as this object."""

    def _get(self, name: str) -> MemoryStructure:
        structure = self._structures.get(name)
        if structure is None:
            raise cf_error(CFReason.NO_SUCH_STRUCTURE, f"no structure {name!r}")
        return structure
