#!/usr/bin/env python3
"""Benchmark `akmc lsp`: the time from an edit (a didChange notification written to the server's
stdin) to the diagnostics it publishes for that version, over stdio, with the default debounce.

Two cases: a leaf workflow that a parent composes (the parent is re-checked too), in a workspace of
that pair plus N unrelated workflows. Prints figures; asserts nothing.

    python bench/lsp_latency.py --files 1000 --edits 30
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

LEAF = """workflow "leaf" {{
  params {{
    name: string
  }}
  outputs {{
    report: string = steps.work.output
  }}
  step work {{
    shell "echo {n}"
    inputs = [params.name]
    output: string
  }}
}}
"""
PARENT = """workflow "parent" {
  step call {
    uses "workflows/leaf" { name = "x" }
  }
  step after {
    shell "cat"
    inputs = [steps.call.output.report]
  }
}
"""
OTHER = """workflow "other {i}" {{
  params {{
    version: string
  }}
  step build {{
    shell "make {i}"
    inputs = [params.version]
    output: {{ ok: bool, files: list[string] }}
    timeout = 5m
  }}
  step test {{
    shell "make test"
    inputs = [steps.build.output.files]
  }}
}}
"""


class Client:
    def __init__(self, root: Path) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "akmc", "lsp"], cwd=root, stdin=subprocess.PIPE, stdout=subprocess.PIPE
        )

    def send(self, message: dict[str, Any]) -> None:
        body = json.dumps({"jsonrpc": "2.0", **message}).encode()
        assert self.process.stdin is not None
        self.process.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
        self.process.stdin.flush()

    def receive(self) -> dict[str, Any]:
        assert self.process.stdout is not None
        header = b""
        while not header.endswith(b"\r\n\r\n"):
            header += self.process.stdout.read(1)
        length = int(header.split(b"Content-Length:")[1].split(b"\r\n")[0])
        message: dict[str, Any] = json.loads(self.process.stdout.read(length))
        return message

    def diagnostics_of(self, uri: str, version: int) -> dict[str, Any]:
        while True:
            message = self.receive()
            params: dict[str, Any] = message.get("params", {})
            if message.get("method") == "textDocument/publishDiagnostics" and params.get("uri") == uri:
                if params.get("version") == version:
                    return params


def measure(files: int, edits: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as directory:
        root = Path(directory)
        (root / "akm.toml").write_text("")
        (root / "workflows").mkdir()
        (root / "workflows" / "leaf.akm").write_text(LEAF.format(n=0))
        (root / "workflows" / "parent.akm").write_text(PARENT)
        for i in range(files):
            (root / "workflows" / f"other{i:05}.akm").write_text(OTHER.format(i=i))
        client = Client(root)
        client.send({"id": 1, "method": "initialize", "params": {"capabilities": {}, "processId": None}})
        while client.receive().get("id") != 1:
            pass
        client.send({"method": "initialized", "params": {}})
        uri = (root / "workflows" / "leaf.akm").as_uri()
        client.send(
            {
                "method": "textDocument/didOpen",
                "params": {"textDocument": {"uri": uri, "languageId": "akm", "version": 1, "text": LEAF.format(n=0)}},
            }
        )
        client.diagnostics_of(uri, 1)
        times = []
        for version in range(2, edits + 2):
            text = LEAF.format(n=version)
            start = time.perf_counter()
            client.send(
                {
                    "method": "textDocument/didChange",
                    "params": {"textDocument": {"uri": uri, "version": version}, "contentChanges": [{"text": text}]},
                }
            )
            client.diagnostics_of(uri, version)
            times.append(time.perf_counter() - start)
        client.send({"id": 2, "method": "shutdown"})
        client.send({"method": "exit"})
        client.process.wait(timeout=30)
    return {"median": statistics.median(times), "p90": sorted(times)[int(len(times) * 0.9)], "max": max(times)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", type=int, default=1000, help="unrelated workflows in the workspace")
    parser.add_argument("--edits", type=int, default=30)
    args = parser.parse_args()
    for files in sorted({0, args.files}):
        figures = measure(files, args.edits)
        shown = ", ".join(f"{k} {v * 1000:.0f} ms" for k, v in figures.items())
        print(f"edit → diagnostics, leaf with a parent, {files + 2} workflows: {shown}")


if __name__ == "__main__":
    main()
