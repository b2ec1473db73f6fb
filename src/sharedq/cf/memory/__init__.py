"""The embedded, in-process list-structure backend."""

from sharedq.cf.memory.connection import MemoryListStructure
from sharedq.cf.memory.facility import MemoryFacility

__all__ = ["MemoryFacility", "MemoryListStructure"]
