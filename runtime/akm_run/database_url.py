"""Which store a command uses: the embedded SQLite state directory, or a shared PostgreSQL database
(`--database URL`, else $AKM_RUN_DATABASE) served by the `postgres` extra (docs/scale-out.md).

Choosing imports neither DBOS nor psycopg unless a postgresql:// URL is given (libpq then parses
it): the plain runtime runs without them."""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import unquote, urlsplit

from akm_run import wording

ENV = "AKM_RUN_DATABASE"
EXTRA = "akm-run[postgres]"
SCHEMES = ("postgresql", "postgres")
# What the extra brings, by import name: DBOS Transact and the PostgreSQL driver it runs on.
EXTRA_MODULES = ("dbos", "psycopg")


class DatabaseError(ValueError):
    """A database URL that cannot select a store: a usage error (exit 2)."""


@dataclass(frozen=True)
class SharedStore:
    """A shared PostgreSQL store, by its libpq URL."""

    url: str

    def __str__(self) -> str:
        return redacted(self.url)

    def __repr__(self) -> str:  # a repr lands in logs and tracebacks: never with the password
        return f"SharedStore({redacted(self.url)!r})"


def redacted(url: str) -> str:
    """The URL as it may be printed: a password replaced by `***`, anything unprintable escaped."""
    url = _query_password(url, "***")
    try:
        parts = urlsplit(url)
        if parts.password is not None:
            host = parts.netloc.rpartition("@")[2]
            url = parts._replace(netloc=f"{parts.username or ''}:***@{host}").geturl()
    except ValueError:  # a malformed netloc: hide everything between the scheme and its last @
        scheme, separator, rest = url.partition("://")
        url = f"{scheme}{separator}***@{rest.rpartition('@')[2]}" if "@" in rest else url
    return printable(url)


def shown(url: str) -> str:
    """The URL as a printed command names it: without its password (~/.pgpass or PGPASSWORD supply
    one), so pasting the command works wherever those do."""
    url = _query_password(url, None)
    try:
        parts = urlsplit(url)
        if parts.password is None:
            return printable(url)
        host = parts.netloc.rpartition("@")[2]
        user = f"{parts.username}@" if parts.username else ""
        return printable(parts._replace(netloc=f"{user}{host}").geturl())
    except ValueError:
        return redacted(url)


def _query_password(url: str, replacement: str | None) -> str:
    """The URL with its `password` query parameters (libpq takes one there too, percent-encoded or
    not) replaced by `password=<replacement>`, or dropped for None."""
    head, mark, rest = url.partition("?")
    if not mark:
        return url
    query, hash_, fragment = rest.partition("#")
    kept = []
    for item in query.split("&"):
        if unquote(item.partition("=")[0]).lower() != "password":
            kept.append(item)
        elif replacement is not None:
            kept.append(f"password={replacement}")
    query = "&".join(kept)
    return f"{head}{'?' if query else ''}{query}{hash_}{fragment}"


def printable(text: str) -> str:
    """Text as it may be printed on one line: anything unprintable escaped."""
    return text if text.isprintable() else repr(text)[1:-1]


def missing_modules() -> list[str]:
    """The extra's modules that cannot be imported here, looked up without importing them."""

    def importable(name: str) -> bool:
        try:
            return importlib.util.find_spec(name) is not None
        except (ImportError, ValueError):
            return False

    return [name for name in EXTRA_MODULES if not importable(name)]


def _utf8(text: str) -> bool:
    """False for text holding bytes that were not UTF-8 (an environment variable, an argument)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def select(option: str | None, environ: Mapping[str, str] = os.environ) -> SharedStore | None:
    """The store a command uses: None for the SQLite state directory (no URL, or an empty one), a
    `SharedStore` for a `postgresql://` URL. Raises DatabaseError for any other scheme, for a URL
    libpq cannot parse, and for a PostgreSQL URL without the extra installed."""
    text = option if option is not None else environ.get(ENV, "")
    if not text:
        return None
    scheme, separator, _ = text.partition("://")
    if not separator or scheme.lower() not in SCHEMES:
        raise DatabaseError(wording.unsupported_database_url(url=redacted(text), variable=ENV))
    if not text.isascii() and not _utf8(text):
        raise DatabaseError(wording.database_url_not_utf8(url=redacted(text)))
    if missing := missing_modules():
        raise DatabaseError(wording.postgres_extra_missing(missing=", ".join(missing), extra=EXTRA))
    # Imported here, for a postgresql:// URL only: psycopg is the extra's, absent from a plain install.
    from psycopg import Error
    from psycopg.conninfo import conninfo_to_dict

    try:
        conninfo_to_dict(text)
    except Error as error:
        # libpq quotes the whole URL, password included, in its message.
        reason = printable(str(error).strip().replace(text, redacted(text)))
        raise DatabaseError(wording.malformed_database_url(url=redacted(text), reason=reason)) from None
    return SharedStore(text)


def unusable(database: SharedStore | None, error: Exception) -> str | None:
    """What to say when the shared store cannot be used (server down, refused login, no such
    database): its driver's error, never a password; None for any other error or store."""
    if database is None or type(error).__module__.split(".")[0] not in ("psycopg", "sqlalchemy", "dbos"):
        return None
    text = " ".join(str(error).split()).replace(database.url, str(database))
    privileges = INSUFFICIENT_PRIVILEGE in (_sqlstate(error), _sqlstate(error.__cause__))
    said = wording.database_privileges if privileges else wording.database_unusable
    return said(database=database, error=text[:500])


INSUFFICIENT_PRIVILEGE = "42501"  # PostgreSQL's SQLSTATE for "permission denied"


def _sqlstate(error: BaseException | None) -> str | None:
    """A PostgreSQL error's SQLSTATE, also through SQLAlchemy's wrapper (DBOS's errors)."""
    if error is None:
        return None
    state = getattr(error, "sqlstate", None) or getattr(getattr(error, "orig", None), "sqlstate", None)
    return state if isinstance(state, str) else None
