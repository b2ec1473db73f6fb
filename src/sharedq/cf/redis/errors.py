"""Every failure of the Redis backend, translated to the list-structure hierarchy here.

Two sources: a script's error reply (``SQ<code> <context> <detail>``, the same reason,
detail and context the memory backend gives), and redis-py's own exceptions, which
say something about the server rather than the structure.  Nothing else in the
backend turns a redis-py exception into ours.
"""

from __future__ import annotations

from redis import exceptions as rx

from sharedq.cf.errors import CFError, CFReason, cf_error

#: The ACL a sharedq user needs, for the message that reports a refused command.
ACL_HINT = (
    "grant what docs/redis.md lists (ACL and TLS): ~sq:{NAME}:* for each structure used, "
    "+fcall, +function|list and the other commands named there, among them those "
    "sharedq's functions run; loading the function library (+function|load) is for "
    "an administrator user"
)
#: How Redis 7.0 words a command or key that a function's caller may not use.  Redis
#: does not roll a function back, so one refused after a write would leave half a
#: change: the documented ACL grants every command the functions run, and a test
#: holds it to them.
_REFUSED_IN_FUNCTION = (
    "The user executing the script can't run",
    "The user executing the script can't access",
)


class ServerChanged(rx.RedisError):
    """A new socket found another server at an address than the one its epoch knew.

    Raised while the socket connects, before any request is sent on it: the server
    restarted (its run id changed) or another took its place (a failover).  Never
    worth resending a user's request over (see ``Epoch`` in ``client.py``).
    """

    def __init__(self, why: str) -> None:
        super().__init__(why)
        self.why = why


def structure_lost(key: str, why: str) -> CFError:
    """``STRUCTURE_LOST`` for a connection to the structure of ``key`` that ``why`` ended."""
    name = key[key.find("{") + 1 : key.find("}")] if "{" in key else key
    return cf_error(CFReason.STRUCTURE_LOST, f"structure {name} is lost to this connection: {why}")


#: Failures worth retrying on a fresh connection: the request may not have run.
TRANSIENT = (
    rx.ConnectionError,
    rx.TimeoutError,
    rx.BusyLoadingError,
    rx.ReadOnlyError,
    rx.ClusterDownError,
    rx.TryAgainError,
)


def is_transient(exc: BaseException) -> bool:
    """Whether ``exc`` says the server was unreachable or busy, not that it refused."""
    if isinstance(exc, (rx.AuthenticationError, rx.AuthorizationError)):
        return False
    if isinstance(exc, TRANSIENT):
        return True
    return isinstance(exc, rx.ResponseError) and str(exc).startswith(("BUSY ", "LOADING"))


def script_error(text: str) -> CFError:
    """The exception for a script's ``SQ<code> <name=value,...|-> <detail>`` reply.

    Context values are integers, or ``x`` and hex digits for values a Lua number cannot
    hold (versions).  Redis appends ``script: <sha>...`` to errors raised in a script.
    """
    head, context_text, detail = text.split(" ", 2)
    detail = detail.split(" script: ", 1)[0]
    context: dict[str, int] = {}
    if context_text != "-":
        for item in context_text.split(","):
            name, value = item.split("=", 1)
            context[name] = int(value[1:], 16) if value.startswith("x") else int(value)
    return cf_error(CFReason(int(head[2:])), detail, **context)


def translate(exc: BaseException, where: str, *, connecting: bool = False) -> CFError:
    """Our exception for anything a Redis request raised.

    ``where`` names the server for the message; ``connecting`` says whether the
    facility was being opened (an unreachable server is then ``CONNECTION_FAILED``,
    and ``STRUCTURE_LOST`` later, once reconnecting has failed).
    """
    if isinstance(exc, CFError):
        return exc
    if isinstance(exc, ServerChanged):
        return cf_error(CFReason.STRUCTURE_LOST, exc.why)
    text = str(exc)
    if isinstance(exc, rx.ResponseError) and text.startswith("SQ"):
        return script_error(text)
    if isinstance(exc, (rx.AuthenticationError, rx.AuthorizationError)) or text.startswith(
        ("WRONGPASS", "NOAUTH", "invalid password", "invalid username-password")
    ):
        return cf_error(CFReason.AUTHENTICATION_FAILED, f"{where} refused the credentials: {text}")
    if isinstance(exc, rx.NoPermissionError) or any(r in text for r in _REFUSED_IN_FUNCTION):
        return cf_error(
            CFReason.AUTHENTICATION_FAILED, f"{where} refused a command: {text} ({ACL_HINT})"
        )
    if isinstance(exc, rx.OutOfMemoryError):
        return cf_error(
            CFReason.STRUCTURE_FULL,
            f"{where} is out of memory (maxmemory): nothing was changed; {text}",
        )
    if is_transient(exc):
        if connecting:
            return cf_error(CFReason.CONNECTION_FAILED, f"cannot reach {where}: {text}")
        return cf_error(
            CFReason.STRUCTURE_LOST, f"lost {where} and could not reconnect in time: {text}"
        )
    return cf_error(CFReason.STRUCTURE_LOST, f"{where} failed a request: {text}")
