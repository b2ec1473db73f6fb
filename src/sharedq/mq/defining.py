"""Defining queues, shared or nonshared, and listing them.

A queue's disposition (MQ's ``QSGDISP``, :class:`~sharedq.mq.definitions.Disposition`)
says where it is defined: ``SHARED`` in a structure of the group, recorded in the
group's directory; ``QMGR`` in the defining manager's own structure
(:mod:`sharedq.mq.private_queues`), recorded in that structure's directory, where
no other manager looks.

A name is shared or nonshared, never both, as on MQ for z/OS, which refuses a
nonshared queue with the name of a shared one and the reverse: two managers may each
have a nonshared ``LQ1``, but then nobody may define a shared ``LQ1``.  The group's
directory records who holds each name (``D`` entries:
:func:`sharedq.mq.directory.hold_queue_name`): each side records its hold first and
looks for the other's second, so that of two managers defining the same name both
ways at once, at least one sees the other and refuses (and both may: then define
again).
"""

from __future__ import annotations

import contextlib
from dataclasses import fields
from typing import Any

from sharedq import names
from sharedq.cf import CFError
from sharedq.mq import arguments, directory, private_queues
from sharedq.mq.core import ManagerCore
from sharedq.mq.definitions import NOT_ATTRIBUTES, Disposition, QueueDefinition, define
from sharedq.mq.errors import MQReason, mq_error, translated
from sharedq.mq.private_queues import PrivateStore
from sharedq.seam.access import StructureAccess, tolerating


def define_queue(
    core: ManagerCore,
    private: PrivateStore,
    name: str,
    structure: str | None,
    attributes: dict[str, Any],
) -> QueueDefinition:
    """Define a queue (see ``QueueManager.define_queue``)."""
    core.check_open()
    core.guard.define(name)
    unknown = set(attributes) - {f.name for f in fields(QueueDefinition)}
    unknown |= NOT_ATTRIBUTES & set(attributes)
    if unknown:
        raise mq_error(MQReason.BAD_ARGUMENT, f"unknown queue attributes {sorted(unknown)}")
    arguments.check_name(names.QUEUE, name, "queue name", new=True)  # not SYSTEM.*
    if structure is not None:
        arguments.check_structure_name(structure)
    nonshared = attributes.get("disposition") is Disposition.QMGR
    if nonshared and structure is not None:
        raise mq_error(
            MQReason.BAD_ARGUMENT,
            f"a nonshared queue is in {core.name}'s own structure, not in {structure}",
        )
    if not nonshared and structure is not None and private_queues.is_private(structure):
        raise mq_error(
            MQReason.BAD_ARGUMENT, f"{structure} is a manager's own structure: no shared queues"
        )
    target = private.name if nonshared else structure or core.admin.name
    definition = QueueDefinition(name, target, **attributes)
    definition.check()  # a disposition that is no Disposition among the rest
    if nonshared:
        with translated(f"define {name}"):
            private.ensure(core)
    acc = core.structures.get(target)
    if acc is None:
        raise mq_error(
            MQReason.CF_NOT_AVAILABLE, f"{core.name} is not connected to structure {target}"
        )
    with translated(f"define {name}"):
        holder = core.qm_id if nonshared else directory.SHARED_HOLDER
        _refuse_if_taken(core, name, nonshared)
        held = directory.hold_queue_name(core.admin, name, holder)
        try:
            _refuse_if_taken(core, name, nonshared)
            recorded = define(
                acc if nonshared else core.admin, acc, definition, core.list_counts[target]
            )
        except BaseException:
            if held:
                with contextlib.suppress(CFError), tolerating():
                    directory.release_queue_name(core.admin, name, holder)
            raise
        if not recorded:
            # Defined meanwhile by another thread or manager, whose the hold is now.
            raise mq_error(MQReason.OBJECT_ALREADY_EXISTS, f"queue {name} exists already")
    return definition


def _refuse_if_taken(core: ManagerCore, name: str, nonshared: bool) -> None:
    """``QueueExists`` (2100) if the name is a queue already, or held the other way."""
    exists = MQReason.OBJECT_ALREADY_EXISTS
    if directory.queue_entry(core.admin, name) is not None:
        what = "a nonshared queue cannot have its name" if nonshared else "it exists already"
        raise mq_error(exists, f"{name} is a shared queue: {what}")
    own = core.private
    if nonshared and own is not None and directory.queue_entry(own, name) is not None:
        raise mq_error(exists, f"nonshared queue {name} of {core.name} exists already")
    holders = directory.queue_name_holders(core.admin, name)
    if nonshared and directory.SHARED_HOLDER in holders:
        raise mq_error(exists, f"{name} is a shared queue: a nonshared queue cannot have its name")
    others = sorted(holders - {directory.SHARED_HOLDER})
    if not nonshared and others:
        managers = directory.managers(core.admin)
        who = ", ".join(managers.get(qm, str(qm)) for qm in others)
        raise mq_error(
            exists, f"{name} is a nonshared queue of {who}: a shared queue cannot have its name"
        )


def queue_names(core: ManagerCore) -> list[str]:
    """The group's shared queues and this manager's nonshared ones, sorted."""
    core.check_open()
    with translated("list queues"):
        found = [entry.name for entry in directory.queue_entries(core.admin)]
        own: StructureAccess | None = core.private
        if own is not None:
            found += [entry.name for entry in directory.queue_entries(own)]
        return sorted(found)
