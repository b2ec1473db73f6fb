"""Credentials for a facility URL from the environment or a file, not the command line.

A password typed in ``--facility redis://:secret@host`` is seen by everyone who can
list processes and kept in shell histories.  So every command that takes a facility
URL also takes the password from ``--password-file PATH`` (the file's first line) or
the ``SHAREDQ_REDIS_PASSWORD`` environment variable, and an ACL user name from
``SHAREDQ_REDIS_USERNAME``; they are put into the URL (``sharedq.cf.url_with_credentials``)
just before it is opened.  A URL that carries a password of its own besides one of
these is refused: two sources of one secret leave the reader guessing which is used.
No message shows a password: every one shows the URL through ``sharedq.cf.redact_url``.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from sharedq.cf import redact_url, url_with_credentials
from sharedq.cf.urls import REDIS_SCHEMES, has_credentials, scheme_of

#: The environment variable a facility password is read from.
PASSWORD_ENV = "SHAREDQ_REDIS_PASSWORD"
#: The environment variable an ACL user name is read from.
USERNAME_ENV = "SHAREDQ_REDIS_USERNAME"

#: ``--password-file``, for every command that takes a facility URL.
password_file_option: Callable[[Callable[..., Any]], Callable[..., Any]] = click.option(
    "--password-file",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    default=None,
    help=f"read the Redis password from this file's first line (else ${PASSWORD_ENV}; "
    f"the ACL user name from ${USERNAME_ENV})",
)


def facility_url(url: str, password_file: Path | None, option: str = "--facility") -> str:
    """``url`` with the password of ``password_file`` (or ``$SHAREDQ_REDIS_PASSWORD``)
    and the user name of ``$SHAREDQ_REDIS_USERNAME`` in it; a usage error naming the
    source if the URL has its own, or if a file is given for a URL that takes none."""
    redis = scheme_of(url) in REDIS_SCHEMES
    if password_file is not None:
        if not redis:
            raise click.UsageError(
                f"--password-file is for a redis://, rediss:// or unix:// {option}, "
                f"not {redact_url(url)}"
            )
        password: str | None = _first_line(password_file)
        source = f"--password-file {password_file}"
    else:
        password = os.environ.get(PASSWORD_ENV) or None
        source = f"${PASSWORD_ENV}"
    username = os.environ.get(USERNAME_ENV) or None
    if not redis or (password is None and username is None):
        return url
    if has_credentials(url):
        raise click.UsageError(
            f"{option} {redact_url(url)} carries credentials and "
            f"{source if password is not None else '$' + USERNAME_ENV} gives them too: "
            f"give them once"
        )
    return url_with_credentials(url, username=username, password=password)


def _first_line(path: Path) -> str:
    """The password a file holds: its first line, without the line's end."""
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise click.BadParameter(
            f"{path} is not UTF-8 text", param_hint="'--password-file'"
        ) from None
    line = text.splitlines()[0] if text else ""
    if not line:
        raise click.BadParameter(f"{path} holds no password", param_hint="'--password-file'")
    return line
