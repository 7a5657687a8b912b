"""The store, and the run in it, that a command's arguments name: the shared PostgreSQL store or the
state directory's SQLite one, and how messages and printed commands name it."""

from __future__ import annotations

import argparse
import os

from akm_run import wording
from akm_run.console import state_dir
from akm_run.database_url import ENV, SharedStore, redacted, select, shown
from akm_run.hints import Hints
from akm_run.rows import RunRow
from akm_run.sqlitestore import SQLiteStore
from akm_run.store import Store

# PG_IMPORT (akm_run.commands): psycopg is imported only for a shared store.


def shared_store(args: argparse.Namespace) -> SharedStore | None:
    """The shared PostgreSQL store the command names (cli.store_refusal has vetted it), else None."""
    return select(getattr(args, "database", None))


def open_store(args: argparse.Namespace, *, reading: bool = False) -> Store | None:
    """The command's store: the shared one, else the state directory's (None when it has no state
    database yet); `reading` opens a read-only state directory too."""
    if (shared := shared_store(args)) is not None:
        from akm_run.pgstore import PostgresStore  # psycopg: only for a shared store (PG_IMPORT)

        return PostgresStore(shared.url)
    directory = state_dir(args)
    if not (directory / "state.db").exists():
        return None
    return SQLiteStore.for_reading(directory) if reading else SQLiteStore(directory)


def existing(args: argparse.Namespace, run_id: str, *, reading: bool = False) -> tuple[Store | None, RunRow | None]:
    """The store and a run in it (None, None when there is no state database)."""
    store = open_store(args, reading=reading)
    return (None, None) if store is None else (store, store.run(run_id))


def where(args: argparse.Namespace) -> str:
    """The store, as messages name it."""
    shared = shared_store(args)
    return (
        wording.in_state_dir(directory=state_dir(args))
        if shared is None
        else wording.in_database(url=redacted(shared.url))
    )


def hints_for(args: argparse.Namespace) -> Hints:
    """The printed commands name the store unless it is the one a bare command finds: a database
    given with --database (never with its password), else a state directory other than the default."""
    shared = shared_store(args)
    if shared is None:
        return Hints.of(state_dir(args))
    named = args.database is not None and args.database != os.environ.get(ENV)
    return Hints(database=shown(shared.url) if named else None)


def names_a_file(args: argparse.Namespace) -> bool:
    """Whether a target that is neither a file nor a run was meant as a plan file."""
    target: str = args.target
    return bool(args.param or args.params_file) or target.endswith(".json") or os.sep in target
