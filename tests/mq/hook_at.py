"""A fault hook that runs an action once, at a chosen point of a manager's requests.

Unlike ``CrashAt`` (which stops the manager dead), the action makes something real
happen at that moment (the disk holding the log fills up, the Redis server runs out of
memory or is killed), and the manager carries on into it.
"""

from __future__ import annotations

from collections.abc import Callable

#: Matches any request, or any structure.
ANY = "*"


class At:
    """Runs ``action`` once, at the ``nth`` point (request, structure, before) armed for."""

    def __init__(self) -> None:
        self.point: tuple[str, str, bool] | None = None
        self.action: Callable[[], None] | None = None
        self.left = 0

    def arm(
        self,
        request: str,
        structure: str,
        before: bool,
        action: Callable[[], None],
        nth: int = 1,
    ) -> None:
        self.point, self.action, self.left = (request, structure, before), action, nth

    def __call__(self, request: str, structure: str, before: bool) -> None:
        if self.action is None or self.point is None:
            return
        want_request, want_structure, want_before = self.point
        if (
            want_request in (ANY, request)
            and want_structure in (ANY, structure)
            and want_before == before
        ):
            self.left -= 1
            if self.left == 0:
                action, self.action = self.action, None
                action()
