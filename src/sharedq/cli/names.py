"""Click callbacks that check a name option by :mod:`sharedq.names`, before any work.

A name that breaks its rule is a usage error naming the option and the rule, given
before a facility is opened or Spark starts, rather than a failure later (or, for a
filter, an empty result that looks like "nothing happened").
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

from sharedq import names

#: A click callback: ``(context, parameter, value) -> value``.
Callback = Callable[[click.Context, click.Parameter, Any], Any]


def _callback(rule: names.NameRule) -> Callback:
    """A callback that checks an option's value (a name, several names or ``None``)."""

    def check(_ctx: click.Context, param: click.Parameter, value: Any) -> Any:
        given: tuple[str, ...] = (
            () if value is None else (value,) if isinstance(value, str) else tuple(value)
        )
        for name in given:
            problem = rule.problem(name)
            if problem is not None:
                raise click.BadParameter(problem, param=param)
        return value

    return check


#: Checks a structure name (or several, or none) option.
structure_name = _callback(names.STRUCTURE)
#: Checks a server (queue manager, log writer) name option.
server_name = _callback(names.SERVER)
#: Checks a queue name option.
queue_name = _callback(names.QUEUE)


def named_path(_ctx: click.Context, param: click.Parameter, value: Any) -> Any:
    """Refuse an empty path: ``""`` is the working directory, never what was meant (the
    demo would replace its ``recovery/`` and ``pipeline/`` there)."""
    if value is not None and str(value) == "":
        raise click.BadParameter("an empty path; name a directory", param=param)
    return value
