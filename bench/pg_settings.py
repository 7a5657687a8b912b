"""What the tests' private PostgreSQL server spends on creating a test's database from the served
template, and idle with those databases, under its own settings or extra ones (docs/performance.md,
"On a quiet machine, and where the last minute goes"). Prints figures; asserts nothing.

    .venv/bin/python bench/pg_settings.py
    .venv/bin/python bench/pg_settings.py --strategy FILE_COPY
    .venv/bin/python bench/pg_settings.py --server-options "-c autovacuum=off -c wal_level=minimal -c max_wal_senders=0"
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import psycopg

HERE = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(HERE / "tests"))
sys.path.insert(0, str(HERE / "bench"))

from cpu_per_test import _SERVER, _server_cpu  # noqa: E402

from helpers import PostgresServer  # noqa: E402


class Server(PostgresServer):
    def __init__(self, extra: str) -> None:
        super().__init__()
        self.extra = extra

    def _start(self) -> None:
        options = f"-k {self.root} -c listen_addresses= -c fsync=off -c max_connections=200 {self.extra}"
        self._run("pg_ctl", "start", "-w", "-t", "60", "-D", str(self.data), "-l", str(self.log), "-o", options)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--databases", type=int, default=30)
    parser.add_argument("--strategy", choices=("WAL_LOG", "FILE_COPY"), help="CREATE DATABASE … STRATEGY")
    parser.add_argument("--server-options", default="", help="more `-c name=value` for the server")
    parser.add_argument("--idle", type=float, default=20.0, help="seconds to measure the server idle")
    args = parser.parse_args()
    server = Server(args.server_options)
    server.start()
    _SERVER["data"] = server.data
    try:
        server.served()  # makes the template (and one copy of it)
        time.sleep(1)
        strategy = f" STRATEGY {args.strategy}" if args.strategy else ""
        before, started = _server_cpu(), time.monotonic()
        with psycopg.connect(server.url(), autocommit=True) as connection:
            for n in range(args.databases):
                connection.execute(f'CREATE DATABASE "bench_{n}" TEMPLATE "{server._template}"{strategy}')
        print(
            f"{args.databases} databases from the served template{strategy}: server CPU "
            f"{_server_cpu() - before:.2f} s in {time.monotonic() - started:.2f} s"
        )
        before = _server_cpu()
        time.sleep(args.idle)
        print(f"idle {args.idle:g} s with {args.databases + 2} databases: server CPU {_server_cpu() - before:.2f} s")
    finally:
        server.stop()


if __name__ == "__main__":
    main()
