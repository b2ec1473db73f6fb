"""A read-only view of what a queue manager holds in its structures.

For operators and tests that must look at the lists themselves (a queue's put list
with its uncommitted entries, a manager's get and expiry lists, its descriptors), as
MQ's DISPLAY commands do: :meth:`QueueManager.view <sharedq.mq.QueueManager.view>`.
Everything is read straight from the structures through the manager's connections,
past its fault hook and its journal: looking changes nothing and is not a request the
crash tests count.
"""

from __future__ import annotations

from dataclasses import dataclass

from sharedq.cf import HIGHEST_KEY, LOWEST_KEY, ListEntry, ListInfo, UserInfo
from sharedq.mq import directory
from sharedq.mq.core import ManagerCore


@dataclass(frozen=True)
class QueueLists:
    """Where a queue is, as its manager sees it."""

    name: str
    structure: str
    put_list: int
    #: The viewing manager's get and expiry lists in that structure.
    get_list: int
    expiry_list: int
    #: The largest message body the queue takes.
    max_body: int
    #: The list authority under which the viewing manager last read its definition.
    authority: int


class ManagerView:
    """Read-only looks at a queue manager's structures (see the module)."""

    def __init__(self, core: ManagerCore) -> None:
        self._core = core

    def __repr__(self) -> str:
        return f"<ManagerView {self._core.name}>"

    @property
    def structures(self) -> list[str]:
        return sorted(self._core.structures)

    def structure_number(self, structure: str) -> int:
        """The structure's number in the group's directory."""
        return self._core.structures[structure].number

    def user_id(self, structure: str) -> int:
        """The manager's user id on the structure."""
        return self._core.structures[structure].conn.user_id

    def seq(self, structure: str) -> int:
        """The structure's sequence number now."""
        return self._core.structures[structure].conn.statistics().seq

    def users(self, structure: str) -> list[UserInfo]:
        return self._core.structures[structure].conn.users()

    def queue(self, name: str) -> QueueLists:
        """Where a queue's lists are (its definition read if not yet)."""
        state = self._core.state(name)
        lists = self._core.lists[state.acc.name]
        return QueueLists(
            name,
            state.acc.name,
            state.put_list,
            lists.get_list,
            lists.expiry_list,
            state.max_body,
            state.authority,
        )

    def manager_lists(self, structure: str, qm_id: int | None = None) -> directory.ManagerLists:
        """A manager's lists in a structure (this one's by default)."""
        if qm_id is None:
            return self._core.lists[structure]
        found = directory.read_manager_lists(self._core.structures[structure], qm_id)
        if found is None:
            raise KeyError(f"manager {qm_id} has no lists in {structure}")
        return found

    def entries(
        self,
        structure: str,
        list_number: int,
        low: bytes = LOWEST_KEY,
        high: bytes = HIGHEST_KEY,
    ) -> list[ListEntry]:
        """The entries of a list, head to tail, between two keys."""
        return list(self._core.structures[structure].conn.scan(list_number, low, high))

    def list_info(self, structure: str, list_number: int) -> ListInfo:
        return self._core.structures[structure].conn.list_info(list_number)

    @property
    def descriptor_list(self) -> int:
        """The list of the administrative structure holding this manager's descriptors."""
        return self._core.descriptor_list

    def descriptors(self) -> list[ListEntry]:
        """The entries of this manager's descriptor list."""
        core = self._core
        return self.entries(core.admin.name, core.descriptor_list)
