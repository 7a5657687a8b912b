"""The tests' private PostgreSQL server is real, private to the session, and reachable only by its socket."""

from __future__ import annotations

import psycopg

from helpers import PostgresServer


def test_a_fresh_database_is_empty_and_served_over_the_private_socket(
    postgres_server: PostgresServer, database_url: str
) -> None:
    with psycopg.connect(database_url) as connection:
        tables = connection.execute("SELECT count(*) FROM pg_tables WHERE schemaname = 'public'").fetchone()
        listen = connection.execute("SHOW listen_addresses").fetchone()
        sockets = connection.execute("SHOW unix_socket_directories").fetchone()
    assert tables == (0,) and listen == ("",) and sockets == (str(postgres_server.root),)


def test_each_test_gets_its_own_database(postgres_server: PostgresServer) -> None:
    assert postgres_server.database() != postgres_server.database()
