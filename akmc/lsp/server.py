"""The protocol side of `akmc lsp` (pygls over stdio): documents, debounced checks, and each request
answered by `navigate.py`, `completion.py` and `fixes.py`, with every handler guarded so that one failure never stops the server."""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import unquote, urlparse

from lsprotocol import types as lsp
from pygls.lsp.server import LanguageServer
from pygls.uris import from_fs_path

from akmc import __version__
from akmc.cache import UsesIndex
from akmc.diagnostics import Diagnostic
from akmc.formatter import SyntaxProblem, format_source
from akmc.lsp import completion, fixes, navigate
from akmc.lsp.analysis import Analysis, check
from akmc.lsp.positions import Lines
from akmc.workspace import SourceError, real_path

FAULT_VARIABLE = "AKMC_LSP_FAULT"  # crash testing: the handler (or "check") it names raises
DEBOUNCE_SECONDS = 0.15  # a check starts this long after the last keystroke; initializationOptions.debounceMs
_F = TypeVar("_F", bound=Callable[..., Any])
log = logging.getLogger("akmc.lsp")


def path_of(uri: str) -> Path | None:
    """The file a `file:` URI names; None for other schemes (an untitled buffer has no workspace)."""
    parsed = urlparse(uri)
    if parsed.scheme != "file":
        return None
    return Path(unquote(parsed.path))


class AkmServer(LanguageServer):
    """The open documents, their last good analyses and the diagnostics last published for each file."""

    def __init__(self) -> None:
        super().__init__("akmc", __version__, text_document_sync_kind=lsp.TextDocumentSyncKind.Full)
        self.texts: dict[str, str] = {}  # open document uri → text
        self.versions: dict[str, int | None] = {}
        self.analyses: dict[str, Analysis] = {}  # uri → the latest analysis
        self.good: dict[str, Analysis] = {}  # uri → the latest analysis that parsed (for completion)
        self.published: dict[str, list[Diagnostic]] = {}  # uri → our diagnostics last published
        self.pending: dict[str, asyncio.Task[None]] = {}
        self.debounce = DEBOUNCE_SECONDS
        self.told: set[str] = set()  # akm.toml problems already shown
        self.indexes: dict[Path, UsesIndex] = {}  # workspace root → the `uses` refs of its files on disk

    @property
    def encoding(self) -> str:
        chosen = self.server_capabilities.position_encoding
        return str(chosen) if chosen is not None else lsp.PositionEncodingKind.Utf16

    def lines(self, uri: str) -> Lines:
        return Lines(self.texts.get(uri, ""), self.encoding)

    def open_files(self) -> dict[Path, str]:
        """The open documents that are files, by resolved path → their uri as the client wrote it."""
        found = {}
        for uri in self.texts:
            path = path_of(uri)
            if path is not None:
                try:
                    found[real_path(path)] = uri
                except OSError:
                    continue
        return found

    # -- checking

    def schedule(self, uri: str) -> None:
        """Check `uri` once its edits pause (each edit restarts the wait)."""
        previous = self.pending.pop(uri, None)
        if previous is not None:
            previous.cancel()
        self.pending[uri] = asyncio.get_running_loop().create_task(self._later(uri))

    async def _later(self, uri: str) -> None:
        await asyncio.sleep(self.debounce)
        self.pending.pop(uri, None)
        try:
            self.run_check(uri)
        except Exception:  # noqa: BLE001 - a failed check is logged; the server goes on
            self.report_failure("checking " + uri)

    def run_check(self, uri: str) -> None:
        _fault("check")
        text = self.texts.get(uri)
        if text is None:
            return
        pending = self.pending.pop(uri, None)
        if pending is not None:
            pending.cancel()
        # A buffer that is no file on disk (untitled) is checked as a file of the current directory.
        path = path_of(uri) or Path(os.getcwd()) / "untitled.akm"
        try:
            key = real_path(path)
        except OSError:
            return
        open_files = self.open_files()
        buffers = {path: self.texts[open_uri] for path, open_uri in open_files.items()}
        buffers[key] = text
        try:
            checked = check(key, buffers, self.indexes)
        except SourceError as error:
            self.window_log_message(lsp.LogMessageParams(lsp.MessageType.Warning, str(error)))
            return
        if checked.config_problem and checked.config_problem not in self.told:
            self.told.add(checked.config_problem)  # once per problem, not on every keystroke
            self.window_show_message(lsp.ShowMessageParams(lsp.MessageType.Warning, checked.config_problem))
        self.analyses[uri] = checked.analysis
        if checked.analysis.workflow is not None:
            self.good[uri] = checked.analysis
        version = self.versions.get(uri)
        for file, diagnostics in checked.diagnostics.items():
            target = uri if file == key else open_files.get(file) or from_fs_path(str(file)) or str(file)
            self.publish(target, diagnostics, version if target == uri else self.versions.get(target))

    def publish(self, uri: str, diagnostics: list[Diagnostic], version: int | None) -> None:
        text = self.texts.get(uri)
        if text is None:
            path = path_of(uri)
            try:
                text = path.read_text(encoding="utf-8", errors="replace") if path is not None else ""
            except OSError:
                text = ""
        lines = Lines(text, self.encoding)
        self.published[uri] = diagnostics
        wire = [fixes.to_lsp(d, lines, self._related(d)) for d in diagnostics]
        self.text_document_publish_diagnostics(lsp.PublishDiagnosticsParams(uri=uri, diagnostics=wire, version=version))

    def _related(self, diagnostic: Diagnostic) -> list[lsp.DiagnosticRelatedInformation]:
        found = []
        for related in diagnostic.related:
            path = Path(related.file) if os.path.isabs(related.file) else Path(os.getcwd()) / related.file
            uri = from_fs_path(str(path)) or str(path)
            try:
                text = self.texts.get(uri) or path.read_text(encoding="utf-8", errors="replace")
            except OSError:
                continue
            lines = Lines(text, self.encoding)
            location = lsp.Location(uri, lines.range(related.span.start, related.span.end))
            found.append(lsp.DiagnosticRelatedInformation(location, related.message))
        return found

    def report_failure(self, what: str) -> None:
        message = f"akmc lsp: internal error while {what}:\n{traceback.format_exc()}"
        log.error(message)
        self.window_log_message(lsp.LogMessageParams(lsp.MessageType.Error, message))


server = AkmServer()


def _fault(point: str) -> None:
    if os.environ.get(FAULT_VARIABLE) == point:
        raise RuntimeError(f"{FAULT_VARIABLE}={point}: a fault injected for testing")


def guarded(default: Any = None) -> Callable[[_F], _F]:
    """Answer `default` (and log the traceback to the client) when a handler fails."""

    def wrap(handler: _F) -> _F:
        @functools.wraps(handler)
        def run(ls: AkmServer, params: Any) -> Any:
            try:
                _fault(handler.__name__)
                return handler(ls, params)
            except Exception:  # noqa: BLE001 - one failed request must not stop the server
                ls.report_failure(f"answering {handler.__name__}")
                return default() if callable(default) else default

        return run  # type: ignore[return-value]

    return wrap


@server.feature(lsp.INITIALIZE)
@guarded()
def initialize(ls: AkmServer, params: lsp.InitializeParams) -> None:
    options = params.initialization_options
    if isinstance(options, dict) and isinstance(options.get("debounceMs"), int | float):
        ls.debounce = max(0.0, float(options["debounceMs"]) / 1000)


@server.feature(lsp.TEXT_DOCUMENT_DID_OPEN)
@guarded()
def did_open(ls: AkmServer, params: lsp.DidOpenTextDocumentParams) -> None:
    document = params.text_document
    ls.texts[document.uri] = document.text
    ls.versions[document.uri] = document.version
    ls.schedule(document.uri)


@server.feature(lsp.TEXT_DOCUMENT_DID_CHANGE)
@guarded()
def did_change(ls: AkmServer, params: lsp.DidChangeTextDocumentParams) -> None:
    uri = params.text_document.uri
    for change in params.content_changes:
        if isinstance(change, lsp.TextDocumentContentChangeWholeDocument):
            ls.texts[uri] = change.text
        else:  # a client that ignores the negotiated full sync: apply the range edit
            lines = ls.lines(uri)
            start, end = lines.offset(change.range.start), lines.offset(change.range.end)
            ls.texts[uri] = ls.texts.get(uri, "")[:start] + change.text + ls.texts.get(uri, "")[end:]
    ls.versions[uri] = params.text_document.version
    ls.schedule(uri)


@server.feature(lsp.TEXT_DOCUMENT_DID_SAVE)
@guarded()
def did_save(ls: AkmServer, params: lsp.DidSaveTextDocumentParams) -> None:
    ls.schedule(params.text_document.uri)


@server.feature(lsp.TEXT_DOCUMENT_DID_CLOSE)
@guarded()
def did_close(ls: AkmServer, params: lsp.DidCloseTextDocumentParams) -> None:
    uri = params.text_document.uri
    for table in (ls.texts, ls.versions, ls.analyses, ls.good):
        table.pop(uri, None)
    pending = ls.pending.pop(uri, None)
    if pending is not None:
        pending.cancel()
    ls.publish(uri, [], None)  # a closed buffer shows nothing; its file's problems return when it opens


@server.feature(lsp.WORKSPACE_DID_CHANGE_WATCHED_FILES)
@guarded()
def watched_files_changed(ls: AkmServer, params: lsp.DidChangeWatchedFilesParams) -> None:
    """A workflow, script or prompt changed on disk (a pull, another editor): check every open one."""
    for uri in list(ls.texts):
        ls.schedule(uri)


def _analysis(ls: AkmServer, uri: str) -> Analysis | None:
    """The analysis of the document's current text: a request that arrives before the debounced
    check of the latest edit checks now."""
    analysis = ls.analyses.get(uri)
    if uri in ls.texts and (analysis is None or analysis.text != ls.texts[uri]):
        ls.run_check(uri)
        analysis = ls.analyses.get(uri)
    return analysis if analysis is not None and analysis.text == ls.texts.get(uri) else None


def _at(ls: AkmServer, params: lsp.HoverParams | lsp.DefinitionParams) -> tuple[Analysis, Lines, int] | None:
    """The current analysis of the document a request names, its lines and the request's offset."""
    analysis = _analysis(ls, params.text_document.uri)
    if analysis is None:
        return None
    lines = ls.lines(params.text_document.uri)
    return analysis, lines, lines.offset(params.position)


@server.feature(lsp.TEXT_DOCUMENT_HOVER)
@guarded()
def hover(ls: AkmServer, params: lsp.HoverParams) -> lsp.Hover | None:
    found = _at(ls, params)
    text = navigate.hover(found[0], found[2]) if found is not None else None
    return lsp.Hover(lsp.MarkupContent(lsp.MarkupKind.Markdown, text)) if text is not None else None


@server.feature(lsp.TEXT_DOCUMENT_DEFINITION)
@guarded()
def definition(ls: AkmServer, params: lsp.DefinitionParams) -> lsp.Location | None:
    found = _at(ls, params)
    target = navigate.definition(found[0], found[2]) if found is not None else None
    if found is None or target is None:
        return None
    path, span = target
    if span is None:  # a file: its start
        return lsp.Location(from_fs_path(str(path)) or str(path), lsp.Range(lsp.Position(0, 0), lsp.Position(0, 0)))
    return lsp.Location(params.text_document.uri, found[1].range(span.start, span.end))


@server.feature(lsp.TEXT_DOCUMENT_COMPLETION, lsp.CompletionOptions(trigger_characters=[".", '"']))
@guarded(default=list)
def complete(ls: AkmServer, params: lsp.CompletionParams) -> list[lsp.CompletionItem]:
    uri = params.text_document.uri
    _analysis(ls, uri)
    text = ls.texts.get(uri, "")
    return completion.completions(text, ls.lines(uri).offset(params.position), ls.good.get(uri))


@server.feature(lsp.TEXT_DOCUMENT_DOCUMENT_SYMBOL)
@guarded(default=list)
def document_symbol(ls: AkmServer, params: lsp.DocumentSymbolParams) -> list[lsp.DocumentSymbol]:
    uri = params.text_document.uri
    analysis = _analysis(ls, uri)
    if analysis is None:
        return []
    return navigate.symbols(analysis, ls.lines(uri))


@server.feature(lsp.TEXT_DOCUMENT_FORMATTING)
@guarded(default=list)
def formatting(ls: AkmServer, params: lsp.DocumentFormattingParams) -> list[lsp.TextEdit]:
    uri = params.text_document.uri
    text = ls.texts.get(uri)
    if text is None:
        return []
    try:
        formatted = format_source(text).text
    except SyntaxProblem:
        return []  # the diagnostics already say why; a file with a syntax error is never reformatted
    if formatted == text:
        return []
    return [lsp.TextEdit(ls.lines(uri).range(0, len(text)), formatted)]


@server.feature(lsp.TEXT_DOCUMENT_CODE_ACTION, lsp.CodeActionOptions(code_action_kinds=[lsp.CodeActionKind.QuickFix]))
@guarded(default=list)
def code_action(ls: AkmServer, params: lsp.CodeActionParams) -> list[lsp.CodeAction]:
    uri = params.text_document.uri
    _analysis(ls, uri)
    text = ls.texts.get(uri, "")
    lines = ls.lines(uri)
    start, end = lines.offset(params.range.start), lines.offset(params.range.end)
    return fixes.code_actions(uri, text, lines, ls.published.get(uri, []), start, end)


def main() -> None:
    server.start_io()
