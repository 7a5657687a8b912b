"""Each store's migration list, in its own dialect, against the databases earlier releases made: a SQLite
state.db and a PostgreSQL `akm_run` schema written by an earlier akm-run open and migrate to exactly the
schema a fresh store gets (the same tables, columns, types, constraints, indexes and triggers, under the
same version numbers).

Earlier releases ran the SQLite list on PostgreSQL through a translation of its words; `earlier_translation`
is that translation, kept here as the record of what they ran (the SQLite list itself is pinned by
test_store.py::test_migrations_are_append_only)."""

from __future__ import annotations

import hashlib
import re
import sqlite3
from pathlib import Path
from typing import Any

import psycopg
import pytest
from syrupy.assertion import SnapshotAssertion

from akm_run.migrations import POSTGRES_MIGRATIONS, SQLITE_MIGRATIONS
from akm_run.pgstore import SCHEMA, PostgresStore
from akm_run.sqlitestore import SQLiteStore
from helpers import PostgresServer

# -- what earlier releases ran ----------------------------------------------------------------------------

_WORDS = (
    (re.compile(r"\bINTEGER PRIMARY KEY AUTOINCREMENT\b"), "BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY"),
    (re.compile(r"\bREAL\b"), "DOUBLE PRECISION"),
    (re.compile(r"\bBLOB\b"), "BYTEA"),
)
_GUARD = re.compile(
    r"CREATE TRIGGER (\w+) BEFORE (UPDATE|DELETE) ON (\w+)\s+BEGIN SELECT RAISE\(ABORT, '([^']*)'\); END;"
)


def _guard(match: re.Match[str]) -> str:
    name, event, table, message = match.groups()
    return (
        f"CREATE FUNCTION {name}() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION '{message}'; END $$;\n"
        f"CREATE TRIGGER {name} BEFORE {event} ON {table} FOR EACH STATEMENT EXECUTE FUNCTION {name}();"
    )


TRANSLATED = 3  # the migrations earlier releases ran through the translation; later ones, as written


def earlier_translation(migration: str) -> str:
    """A SQLite migration as earlier releases ran it on PostgreSQL."""
    for word, replacement in _WORDS:
        migration = word.sub(replacement, migration)
    return _GUARD.sub(_guard, migration)


def earlier_postgres(url: str, upto: int) -> None:
    """The `akm_run` schema as an earlier release left it after migration `upto` (each migration
    recorded with its version number and, for the test, the version as its time)."""
    with psycopg.connect(url, autocommit=True) as connection:
        connection.execute(f"CREATE SCHEMA {SCHEMA}")
        connection.execute(f"SET search_path TO {SCHEMA}")
        connection.execute("CREATE TABLE migrations (version INTEGER PRIMARY KEY, applied_at DOUBLE PRECISION)")
        for version, script in enumerate(SQLITE_MIGRATIONS[:upto], start=1):
            ran = earlier_translation(script) if version <= TRANSLATED else POSTGRES_MIGRATIONS[version - 1]
            connection.execute(ran.encode())
            connection.execute("INSERT INTO migrations VALUES (%s, %s)", (version, float(version)))


def earlier_sqlite(state_dir: Path, upto: int) -> None:
    """A state.db as an earlier release left it after migration `upto`."""
    state_dir.mkdir(parents=True)
    with sqlite3.connect(state_dir / "state.db") as db:
        db.execute("CREATE TABLE IF NOT EXISTS migrations (version INTEGER PRIMARY KEY, applied_at REAL)")
        for version, script in enumerate(SQLITE_MIGRATIONS[:upto], start=1):
            db.executescript(script)
            db.execute("INSERT INTO migrations VALUES (?, ?)", (version, float(version)))


# -- a schema, as the database describes it ---------------------------------------------------------------

POSTGRES_CATALOG = {
    "columns": "SELECT table_name, ordinal_position, column_name, data_type, is_nullable, column_default, "
    "is_identity, identity_generation FROM information_schema.columns WHERE table_schema = %s ORDER BY 1, 2",
    "constraints": "SELECT t.relname, c.conname, pg_get_constraintdef(c.oid) FROM pg_constraint c "
    "JOIN pg_class t ON t.oid = c.conrelid JOIN pg_namespace n ON n.oid = t.relnamespace "
    "WHERE n.nspname = %s ORDER BY 1, 2",
    "indexes": "SELECT tablename, indexname, indexdef FROM pg_indexes WHERE schemaname = %s ORDER BY 1, 2",
    "triggers": "SELECT c.relname, t.tgname, pg_get_triggerdef(t.oid) FROM pg_trigger t "
    "JOIN pg_class c ON c.oid = t.tgrelid JOIN pg_namespace n ON n.oid = c.relnamespace "
    "WHERE n.nspname = %s AND NOT t.tgisinternal ORDER BY 1, 2",
    "functions": "SELECT p.proname, pg_get_function_result(p.oid), l.lanname, p.prosrc FROM pg_proc p "
    "JOIN pg_namespace n ON n.oid = p.pronamespace JOIN pg_language l ON l.oid = p.prolang "
    "WHERE n.nspname = %s ORDER BY 1",
    "sequences": "SELECT c.relname, s.seqtypid::regtype::text, s.seqstart, s.seqincrement, s.seqmin, s.seqmax, "
    "s.seqcycle FROM pg_sequence s JOIN pg_class c ON c.oid = s.seqrelid "
    "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = %s ORDER BY 1",
}


def postgres_schema(url: str) -> dict[str, Any]:
    with psycopg.connect(url) as connection:
        described = {what: connection.execute(sql, (SCHEMA,)).fetchall() for what, sql in POSTGRES_CATALOG.items()}
        described["versions"] = connection.execute(f"SELECT version FROM {SCHEMA}.migrations ORDER BY 1").fetchall()
    return described


def sqlite_schema(state_dir: Path) -> dict[str, Any]:
    with sqlite3.connect(state_dir / "state.db") as db:
        objects = db.execute("SELECT type, name, tbl_name, sql FROM sqlite_master ORDER BY 1, 2").fetchall()
        tables = [name for kind, name, _, _ in objects if kind == "table"]
        return {
            "objects": [(kind, name, table, " ".join((sql or "").split())) for kind, name, table, sql in objects],
            "columns": {table: db.execute(f"PRAGMA table_xinfo({table})").fetchall() for table in tables},
            "foreign_keys": {table: db.execute(f"PRAGMA foreign_key_list({table})").fetchall() for table in tables},
            "versions": db.execute("SELECT version FROM migrations ORDER BY 1").fetchall(),
        }


# -- PostgreSQL ---------------------------------------------------------------------------------------------


def test_postgres_migrations_are_append_only(snapshot: SnapshotAssertion) -> None:
    """As test_store.py::test_migrations_are_append_only for SQLite's list: a released migration
    never changes; a new one is appended to both lists, and both snapshots updated in its commit."""
    assert [hashlib.sha256(m.encode()).hexdigest() for m in POSTGRES_MIGRATIONS] == snapshot


def test_each_change_of_the_schema_has_the_same_version_in_both_dialects() -> None:
    assert len(POSTGRES_MIGRATIONS) == len(SQLITE_MIGRATIONS)


def test_a_fresh_postgres_journal_is_the_schema_earlier_releases_made(postgres_server: PostgresServer) -> None:
    earlier, fresh = postgres_server.database(), postgres_server.database()
    earlier_postgres(earlier, len(SQLITE_MIGRATIONS))
    PostgresStore(fresh).close()
    assert postgres_schema(fresh) == postgres_schema(earlier)


@pytest.mark.parametrize("upto", range(1, len(SQLITE_MIGRATIONS) + 1))
def test_an_earlier_postgres_journal_migrates_to_the_fresh_schema_keeping_its_versions(
    postgres_server: PostgresServer, upto: int
) -> None:
    earlier, fresh = postgres_server.database(), postgres_server.database()
    earlier_postgres(earlier, upto)
    PostgresStore(fresh).close()
    store = PostgresStore(earlier)
    store.publish_run("r1", {"ref": "w", "title": "w", "steps": [{"stepId": "a", "index": 0}]}, "sha256:x", {})
    store.close()
    with psycopg.connect(earlier) as connection:
        applied = connection.execute(f"SELECT version, applied_at FROM {SCHEMA}.migrations ORDER BY 1").fetchall()
    assert applied[:upto] == [(version, float(version)) for version in range(1, upto + 1)]  # left as they were
    assert postgres_schema(earlier) == postgres_schema(fresh)


# -- SQLite -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("upto", range(1, len(SQLITE_MIGRATIONS) + 1))
def test_an_earlier_state_database_migrates_to_the_fresh_schema_keeping_its_versions(tmp_path: Path, upto: int) -> None:
    earlier_sqlite(tmp_path / "earlier", upto)
    SQLiteStore(tmp_path / "fresh").close()
    store = SQLiteStore(tmp_path / "earlier")
    store.publish_run("r1", {"ref": "w", "title": "w", "steps": [{"stepId": "a", "index": 0}]}, "sha256:x", {})
    store.close()
    with sqlite3.connect(tmp_path / "earlier" / "state.db") as db:
        applied = db.execute("SELECT version, applied_at FROM migrations ORDER BY 1").fetchall()
    assert applied[:upto] == [(version, float(version)) for version in range(1, upto + 1)]
    assert sqlite_schema(tmp_path / "earlier") == sqlite_schema(tmp_path / "fresh")


# -- a migration that fails -----------------------------------------------------------------------------------

BROKEN = """
    CREATE TABLE half_made (a INTEGER);
    SELECT no_such_function();
"""


class BrokenSQLite(SQLiteStore):
    MIGRATIONS = (*SQLITE_MIGRATIONS, BROKEN)


class BrokenPostgres(PostgresStore):
    MIGRATIONS = (*POSTGRES_MIGRATIONS, BROKEN)


def test_a_migration_that_fails_leaves_the_state_database_as_it_was(tmp_path: Path) -> None:
    SQLiteStore(tmp_path).close()
    with pytest.raises(sqlite3.OperationalError, match="no_such_function"):
        BrokenSQLite(tmp_path)
    assert sqlite_schema(tmp_path)["versions"] == [(v,) for v in range(1, len(SQLITE_MIGRATIONS) + 1)]
    assert "half_made" not in {name for _, name, _, _ in sqlite_schema(tmp_path)["objects"]}
    SQLiteStore(tmp_path).close()


def test_a_migration_that_fails_leaves_the_postgres_journal_as_it_was(database_url: str) -> None:
    PostgresStore(database_url).close()
    before = postgres_schema(database_url)
    with pytest.raises(psycopg.errors.UndefinedFunction):
        BrokenPostgres(database_url)
    assert postgres_schema(database_url) == before
    PostgresStore(database_url).close()
