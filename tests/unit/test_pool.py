"""akm_run.pool's heartbeats against a real PostgreSQL server: who counts as silent is decided by the
database's clock alone, a worker never takes itself over, and one that beats again is not forgotten."""

from __future__ import annotations

import logging
import sys
import traceback

import psycopg

from akm_run.pool import SCHEMA, Liveness, OneLine, dbos_config


def age(url: str, executor: str, seconds: int) -> None:
    """Move an executor's last beat into the past, as if it had stopped beating then."""
    with psycopg.connect(url, autocommit=True) as connection:
        connection.execute(
            f"UPDATE {SCHEMA}.executors SET beat = now() - make_interval(secs => %s) WHERE executor_id = %s",
            (seconds, executor),
        )


def test_only_other_executors_silent_longer_than_the_takeover_time_are_silent(database_url: str) -> None:
    one, two, three = (Liveness(database_url, name, takeover_after_s=30) for name in ("w1", "w2", "w3"))
    for worker in (one, two, three):
        worker.beat()
    age(database_url, "w1", 31)
    age(database_url, "w2", 29)
    assert three.silent() == ["w1"]
    age(database_url, "w3", 3600)
    assert three.silent() == ["w1"]  # never itself, however long it has been silent
    assert one.silent() == ["w3"]


def test_a_beat_brings_an_executor_back(database_url: str) -> None:
    one, two = Liveness(database_url, "w1"), Liveness(database_url, "w2")
    one.beat()
    age(database_url, "w1", 3600)
    assert two.silent() == ["w1"]
    one.beat()
    assert two.silent() == []


def test_setting_up_twice_keeps_the_beats(database_url: str) -> None:
    Liveness(database_url, "w1").beat()
    age(database_url, "w1", 3600)
    assert Liveness(database_url, "w2").silent() == ["w1"]


def test_every_process_shares_one_pinned_application_version() -> None:
    first, second = dbos_config("postgresql://h/db", "w1"), dbos_config("postgresql://h/db", "w2")
    assert first["application_version"] == second["application_version"] != ""
    assert (first["executor_id"], second["executor_id"]) == ("w1", "w2")


def _record(message: str, *, exc_info: bool = False) -> logging.LogRecord:
    """A DBOS warning as DBOS logs one: `message` with TRACE replaced by the traceback of a chained
    exception, or that exception as the record's exc_info."""
    try:
        try:
            raise OSError("connection is bad: no such socket")
        except OSError as error:
            raise RuntimeError("(OSError) connection is bad:\n\tIs the server running?") from error
    except RuntimeError:
        trace, raised = traceback.format_exc(), sys.exc_info()
    text = message.replace("TRACE", trace)
    return logging.LogRecord("dbos", logging.WARNING, "x.py", 1, text, (), raised if exc_info else None)


def test_a_dbos_warning_with_a_traceback_reads_as_the_exception_on_one_line() -> None:
    record = _record("Exception polling schedules: TRACE")
    assert OneLine().filter(record)
    assert record.getMessage() == "Exception polling schedules: RuntimeError: (OSError) connection is bad:"


def test_a_dbos_exception_record_loses_its_traceback_and_keeps_its_message_on_one_line() -> None:
    record = _record(
        "Exception in queue thread:\n\tIs the server running?\n(Background on this error at: x)", exc_info=True
    )
    assert OneLine().filter(record)
    assert record.exc_info is None and record.exc_text is None
    expected = "Exception in queue thread: Is the server running? RuntimeError: (OSError) connection is bad:"
    assert record.getMessage() == expected
    assert "Traceback" not in logging.Formatter().format(record)
