"""The report of `akmc check`, written in sorted file order while files are still being checked.

Every format sorts diagnostics by file, then position: a file's diagnostics are written as soon as
its result and the results of every file sorted before it are in. The order is settled before the
first share is checked: the files named (and the parents found for them), the results the cache
answers, and each share's files with the children their text names (`akmc.workspace.uses_refs`,
which finds every `uses` a parse can find). A file a share may still produce is waited for until
that share is done; one no share can produce is passed over. A result no share was expected to
produce (a file edited while the check runs, to compose another) stops the writing until the end,
where everything left is written in order.

The text and github formats are lines: they are written file by file, and what stays in memory is
the results that arrived before their turn. The json and sarif formats are one document each (a
JSON array; a SARIF log whose results sit inside its run): they keep every diagnostic, though not
the records or source lines, until the end."""

from __future__ import annotations

import bisect
import os
import signal
import sys
from collections.abc import Collection, Sequence
from typing import IO

from akmc.diagnostics import ERROR, Diagnostic
from akmc.render import text

# FORMAT_IMPORT: the renderers of the other formats (json, sarif, github) are imported when their
# format is asked for: about 2 ms of start-up that the text format, which pre-commit hooks use, never needs.

_Lines = dict[int, str]


class Output:
    def __init__(self, output_format: str, docs_url: str | None, stream: IO[str] | None = None) -> None:
        self.format, self.docs_url = output_format, docs_url
        self.stream = stream if stream is not None else sys.stdout
        self.owners: dict[str, set[int]] = {}  # file → the shares that may still produce its result
        self.held: dict[str, tuple[_Lines, list[Diagnostic]]] = {}  # arrived before their turn
        self.order: list[str] | None = None  # every expected file, sorted (once planning is over)
        self.next = 0  # the first file of `order` not written yet
        self.last = ""  # the last file passed
        self.shares = 0
        self.finished: set[int] = set()
        self.kept: list[Diagnostic] = []  # json and sarif: the whole document's diagnostics
        self.checked = self.errors = self.warnings = self.files = 0
        self.strict_findings = False
        self.unplanned = False  # a result arrived that no share was expected to produce

    @property
    def diagnostics(self) -> int:
        return self.errors + self.warnings

    # -- planning ----------------------------------------------------------------------------------

    def share(self, files: Collection[str]) -> int:
        """A share that may produce the results of `files`; its number, for `done`."""
        number = self.shares
        self.shares += 1
        for file in files:
            self.owners.setdefault(file, set()).add(number)
        return number

    def start(self) -> None:
        """Planning is over: every expected file is known; write what can be written."""
        self.order = sorted({*self.owners, *self.held})
        self._flush()

    # -- results -----------------------------------------------------------------------------------

    def add(self, file: str, lines: _Lines, diagnostics: Sequence[Diagnostic], strict: bool) -> None:
        """One checked file's result (`diagnostics`: those its configuration reports)."""
        self.checked += 1
        if diagnostics:
            self.files += 1
            errors = sum(1 for d in diagnostics if d.severity == ERROR)
            self.errors += errors
            self.warnings += len(diagnostics) - errors
            self.strict_findings = self.strict_findings or strict
        self.held[file] = (lines, sorted(diagnostics, key=Diagnostic.sort_key))
        if self.order is None:
            return
        if file not in self.owners:
            # A file no plan expected (it changed since it was read to compose another): more may
            # come, anywhere in the order, so nothing more is written until every share is done.
            self.unplanned = True
            if file > self.last:
                bisect.insort(self.order, file, lo=self.next)
                self.owners[file] = set()
            else:  # what sorts after it is written already: write it now rather than lose it
                self._write(file, *self.held.pop(file))
                return
        self._flush()

    def done(self, share: int) -> None:
        """Every result `share` produced was added (or it died: its files will not come)."""
        self.finished.add(share)
        self._flush()

    def _flush(self, last: bool = False) -> None:
        order = self.order
        if order is None or (self.unplanned and not last):
            return
        while self.next < len(order):
            file = order[self.next]
            if file in self.held:
                self._write(file, *self.held.pop(file))
            elif self.owners.get(file, set()) - self.finished:
                return  # a share that may produce it is still running
            self.owners.pop(file, None)
            self.last = file
            self.next += 1

    def _write(self, file: str, lines: _Lines, diagnostics: list[Diagnostic]) -> None:
        if not diagnostics:
            return
        if self.format in ("json", "sarif"):
            self.kept += diagnostics
        elif self.format == "github":
            from akmc.render import github  # FORMAT_IMPORT

            self._print(github.render(diagnostics))
        else:
            self._print("".join(text.render_one(d, lines) + "\n" for d in diagnostics))

    def finish(self, quiet: bool) -> None:
        """Every share is done: write what is left, then the summary or the document."""
        if self.order is None:
            self.start()
        self.finished.update(range(self.shares))
        self._flush(last=True)
        if self.format == "json":
            from akmc.render import json as renderer  # FORMAT_IMPORT

            self._print(renderer.render(self.kept))
        elif self.format == "sarif":
            from akmc.render import sarif  # FORMAT_IMPORT

            self._print(sarif.render(self.kept, self.docs_url))
        elif self.format == "text" and not quiet:
            self._print(text.summary_line(self.errors, self.warnings, self.files, self.checked) + "\n")

    def _print(self, chunk: str) -> None:
        """Write whole lines: an interrupt (SIGINT) waits until they are out, so none is cut short."""
        mask = getattr(signal, "pthread_sigmask", None)
        previous = mask(signal.SIG_BLOCK, {signal.SIGINT}) if mask is not None else None
        try:
            self.stream.write(chunk)
            self.stream.flush()
        finally:
            if mask is not None and previous is not None:
                mask(signal.SIG_SETMASK, previous)

    def abandon(self) -> None:
        """The reader closed the pipe: send the rest of stdout nowhere, so exiting raises nothing."""
        if self.stream is sys.stdout:
            try:
                devnull = os.open(os.devnull, os.O_WRONLY)
                os.dup2(devnull, sys.stdout.fileno())
                os.close(devnull)
            except (OSError, ValueError):
                pass
