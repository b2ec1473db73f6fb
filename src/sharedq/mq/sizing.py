"""Sizing a structure for shared queues.

A structure's lists are list 0 (the control list), one put list per queue, and per
manager that connects a get list and an expiry list (and, in the administrative
structure, a descriptor list).  Its entries are the messages (one entry each, plus one
LHQC per queue), the control entries, and the descriptors of units of work in
progress (one 4 KiB part per about fifty operations).
"""

from __future__ import annotations

from sharedq.cf import StructureParams
from sharedq.cf.params import DEFAULT_EMC_PERCENT, ELEMENT_SIZES, MAX_LIST_COUNT
from sharedq.cf.types import MAX_ENTRY_BYTES
from sharedq.mq.errors import MQReason, mq_error

#: The most messages a structure is sized for (a billion: MQ's MAXDEPTH is below it).
MAX_MESSAGES = 1_000_000_000


def structure_params(
    name: str,
    *,
    queues: int = 32,
    managers: int = 8,
    messages: int = 10_000,
    message_bytes: int = 1024,
    element_size: int = 256,
    emc_percent: int = DEFAULT_EMC_PERCENT,
    growth: float = 1.0,
) -> StructureParams:
    """Parameters for a structure holding ``queues`` queues of ``messages`` messages in
    all (of ``message_bytes`` bytes each, on average) for up to ``managers`` managers.

    Every count is a whole number: ``queues``, ``messages`` and ``message_bytes`` 0 or
    more, ``managers`` 1 to 254 (a manager id's range); a negative count would
    otherwise shrink the structure silently.  ``InvalidArgument`` (``BAD_ARGUMENT``)
    names the one that is not; the list-structure layer checks the rest (the name,
    ``element_size``, ``emc_percent``, ``growth``) as ``StructureParams.for_capacity``
    does.
    """
    for what, value, low, high in (
        ("queues", queues, 0, MAX_LIST_COUNT),
        ("managers", managers, 1, 254),
        ("messages", messages, 0, MAX_MESSAGES),
        ("message_bytes", message_bytes, 0, MAX_ENTRY_BYTES),
    ):
        if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
            raise mq_error(
                MQReason.BAD_ARGUMENT, f"{what} {value!r} must be a whole number, {low}..{high}"
            )
    lists = 1 + queues + 3 * managers
    header = 120  # message header and a manager name
    # A size that is none of the element sizes (text, None...) is for
    # ``for_capacity`` to refuse; until then the sums use the smallest.
    unit = element_size if element_size in ELEMENT_SIZES else ELEMENT_SIZES[0]
    elements_per_message = -(-(message_bytes + header) // unit)
    control = 4 * managers + 2 * queues + 600
    descriptors = max(64, messages // 16)
    entries = messages + queues + control + descriptors
    elements = (
        messages * elements_per_message + control + descriptors * -(-4096 // unit) + queues * 2
    )
    return StructureParams.for_capacity(
        name,
        list_count=lists,
        entries=entries,
        elements=elements,
        element_size=element_size,
        emc_percent=emc_percent,
        growth=growth,
    )
