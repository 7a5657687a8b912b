"""`akmc lsp` end to end: a real client (pytest-lsp) drives `python -m akmc lsp` over stdio, in a
real workspace on disk, through every feature."""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import AsyncIterator, Callable, Sequence
from pathlib import Path

import pytest
import pytest_lsp
from lsprotocol import types as lsp
from pygls.uris import from_fs_path
from pytest_lsp import ClientServerConfig, LanguageClient

from akmc.compiler import Session
from akmc.formatter import format_source

# One server for the module, its start-up being the slow part; one pytest-xdist worker runs the module.
pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.xdist_group("lsp")]

CHILD = """workflow "child" {
  params {
    name: string
  }
  outputs {
    report: string = steps.work.output
    count: int = steps.tally.output.total
  }
  step work {
    shell "echo"
    inputs = [params.name]
    output: string
  }
  step tally {
    script "scripts/tally.sh"
    output: { total: int }
  }
}
"""
PARENT = """workflow "parent" {
  params {
    who: string = "ada"  "Who to greet"
  }
  step collect {
    shell "ls"
    output: { files: list[string], total: int }
  }
  step call {
    uses "workflows/child" { name = params.who }
  }
  step after {
    agent file("prompts/after.md")
    inputs = [steps.call.output.report, steps.collect.output.files]
  }
}
"""


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    (tmp_path / "akm.toml").write_text("")
    (tmp_path / "workflows").mkdir()
    (tmp_path / "scripts").mkdir()
    (tmp_path / "prompts").mkdir()
    (tmp_path / "workflows" / "child.akm").write_text(CHILD)
    (tmp_path / "workflows" / "parent.akm").write_text(PARENT)
    (tmp_path / "scripts" / "tally.sh").write_text("#!/bin/sh\necho '{\"total\": 1}'\n")
    (tmp_path / "prompts" / "after.md").write_text("Summarise.\n")
    return tmp_path


SERVER = ClientServerConfig(server_command=[sys.executable, "-m", "akmc", "lsp"])


def _params(encodings: list[str] | None = None) -> lsp.InitializeParams:
    general = lsp.GeneralClientCapabilities(position_encodings=encodings) if encodings else None
    return lsp.InitializeParams(
        capabilities=lsp.ClientCapabilities(general=general),
        initialization_options={"debounceMs": 20},
    )


@pytest_lsp.fixture(config=SERVER, scope="module")  # type: ignore[untyped-decorator]  # pytest-lsp's decorator is unannotated
async def client(lsp_client: LanguageClient) -> AsyncIterator[None]:
    await lsp_client.initialize_session(_params())
    yield
    await lsp_client.shutdown_session()


@pytest_lsp.fixture(config=SERVER, scope="module")  # type: ignore[untyped-decorator]  # pytest-lsp's decorator is unannotated
async def utf8_client(lsp_client: LanguageClient) -> AsyncIterator[None]:
    result = await lsp_client.initialize_session(_params([lsp.PositionEncodingKind.Utf8]))
    assert result.capabilities.position_encoding == lsp.PositionEncodingKind.Utf8
    yield
    await lsp_client.shutdown_session()


def uri(path: Path) -> str:
    found: str | None = from_fs_path(str(path))  # pygls leaves it unannotated
    assert found is not None
    return found


async def published(
    client: LanguageClient, target: str, until: Callable[[list[lsp.Diagnostic]], bool]
) -> list[lsp.Diagnostic]:
    """Wait for diagnostics of `target` that satisfy `until` (the timeout only guards against a hang)."""

    async def wait() -> list[lsp.Diagnostic]:
        while True:
            found = client.diagnostics.get(target)
            if found is not None and until(list(found)):
                return list(found)
            await client.wait_for_notification(lsp.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)

    return await asyncio.wait_for(wait(), timeout=60)


def codes(diagnostics: list[lsp.Diagnostic]) -> list[str]:
    return sorted(str(d.code) for d in diagnostics)


def open_doc(client: LanguageClient, path: Path, text: str | None = None, version: int = 1) -> str:
    target = uri(path)
    client.text_document_did_open(
        lsp.DidOpenTextDocumentParams(
            lsp.TextDocumentItem(target, "akm", version, text if text is not None else path.read_text())
        )
    )
    return target


def change(client: LanguageClient, target: str, text: str, version: int) -> None:
    client.text_document_did_change(
        lsp.DidChangeTextDocumentParams(
            lsp.VersionedTextDocumentIdentifier(version=version, uri=target),
            [lsp.TextDocumentContentChangeWholeDocument(text=text)],
        )
    )


def position(text: str, needle: str, after: int = 0) -> lsp.Position:
    """The UTF-16 position of the first character of `needle` (plus `after` characters)."""
    offset = text.index(needle) + after
    line = text.count("\n", 0, offset)
    column = text[text.rfind("\n", 0, offset) + 1 : offset]
    return lsp.Position(line, len(column.encode("utf-16-le")) // 2)


# -- diagnostics -------------------------------------------------------------------------------------


async def test_diagnostics_on_open_and_change_are_those_of_akmc_check(client: LanguageClient, workspace: Path) -> None:
    parent = workspace / "workflows" / "parent.akm"
    broken = PARENT.replace("steps.call.output.report", "steps.cal.output.report")
    target = open_doc(client, parent, broken)
    found = await published(client, target, lambda d: bool(d))
    parent.write_text(broken)
    expected = Session(workspace).check(parent).report.diagnostics
    parent.write_text(PARENT)
    assert [(str(d.code), d.range.start.line + 1, d.range.start.character + 1) for d in found] == [
        (e.code, e.span.line, e.span.column) for e in expected
    ]
    assert found[0].code == "E203" and "did you mean `call`?" in found[0].message and found[0].source == "akmc"
    change(client, target, PARENT, 2)
    assert await published(client, target, lambda d: not d) == []


async def test_an_edit_to_a_child_makes_the_parents_diagnostic_appear(client: LanguageClient, workspace: Path) -> None:
    child, parent = workspace / "workflows" / "child.akm", workspace / "workflows" / "parent.akm"
    child_uri = open_doc(client, child)
    await published(client, child_uri, lambda d: not d)
    change(client, child_uri, CHILD.replace("report: string =", "summary: string ="), 2)  # unsaved
    found = await published(client, uri(parent), lambda d: bool(d))
    assert codes(found) == ["E407"] and found[0].range.start.line == PARENT.count(
        "\n", 0, PARENT.index("output.report")
    )
    assert "summary" in found[0].message
    change(client, child_uri, CHILD, 3)
    assert await published(client, uri(parent), lambda d: not d) == []


async def test_rapid_edits_end_in_the_diagnostics_of_the_last_version(client: LanguageClient, workspace: Path) -> None:
    target = open_doc(client, workspace / "workflows" / "parent.akm")
    for version in range(2, 12):
        change(client, target, PARENT.replace("steps.call", f"steps.c{version}"), version)
    change(client, target, PARENT.replace("params.who", "params.whom"), 12)
    found = await published(client, target, lambda d: codes(d) == ["E205"])
    assert "whom" in next(d for d in found if d.code == "E205").message


async def test_positions_count_utf16_code_units_by_default(client: LanguageClient, workspace: Path) -> None:
    source = 'workflow "w" {\n  step a { shell "😀é" }  step b { shell "x"  inputs = [steps.nope.output] }\n}\n'
    target = open_doc(client, workspace / "workflows" / "emoji.akm", source)
    (diagnostic,) = await published(client, target, lambda d: bool(d))
    assert diagnostic.range.start == position(source, "nope")  # 😀 counts 2, é counts 1
    assert diagnostic.range.start.character == source.splitlines()[1].index("nope") + 1


async def test_positions_count_utf8_bytes_when_negotiated(utf8_client: LanguageClient, workspace: Path) -> None:
    source = 'workflow "w" {\n  step a { shell "😀é" }  step b { shell "x"  inputs = [steps.nope.output] }\n}\n'
    target = open_doc(utf8_client, workspace / "workflows" / "emoji.akm", source)
    (diagnostic,) = await published(utf8_client, target, lambda d: bool(d))
    line = source.splitlines()[1]
    assert diagnostic.range.start.character == len(line[: line.index("nope")].encode("utf-8"))
    hover = await utf8_client.text_document_hover_async(
        lsp.HoverParams(lsp.TextDocumentIdentifier(target), lsp.Position(1, diagnostic.range.start.character))
    )
    assert hover is not None and isinstance(hover.contents, lsp.MarkupContent) and "E203" in hover.contents.value


# -- hover, definition, completion, outline --------------------------------------------------------------


async def _hover(client: LanguageClient, target: str, text: str, needle: str, after: int = 0) -> str:
    result = await client.text_document_hover_async(
        lsp.HoverParams(lsp.TextDocumentIdentifier(target), position(text, needle, after))
    )
    assert result is not None, needle
    assert isinstance(result.contents, lsp.MarkupContent)
    return result.contents.value


async def test_hover(client: LanguageClient, workspace: Path) -> None:
    target = open_doc(client, workspace / "workflows" / "parent.akm")
    await published(client, target, lambda d: not d)
    assert "step `collect`: shell" in await _hover(client, target, PARENT, "collect {")
    assert "output: `{ files: list[string], total: int }`" in await _hover(client, target, PARENT, "collect {")
    param = await _hover(client, target, PARENT, "params.who", 8)
    assert "param `who`: `string`" in param and 'default: `"ada"`' in param and "Who to greet" in param
    assert "`steps.collect.output.files`: `list[string]`" in await _hover(client, target, PARENT, "output.files]", 8)
    assert "`steps.call.output.report`: `string`" in await _hover(client, target, PARENT, "output.report", 8)
    uses = await _hover(client, target, PARENT, '"workflows/child"', 3)
    assert "child workflow `workflows/child`" in uses and "`report`" in uses and "`count`" in uses


PARALLEL = """workflow "checks" {
  parallel checks {
    step lint { shell "echo 1" }
    step unit { shell "echo 2" }
  }
}
"""


async def test_hover_on_a_parallel_block_names_its_members_and_its_output(
    client: LanguageClient, workspace: Path
) -> None:
    target = open_doc(client, workspace / "workflows" / "checks.akm", PARALLEL)
    await published(client, target, lambda d: not d)
    shown = await _hover(client, target, PARALLEL, "checks {")
    assert "step `checks`: parallel, members `lint`, `unit`" in shown, shown
    assert "output: `{ lint: any, unit: any }`" in shown, shown  # shell output is untyped JSON


async def test_hover_explains_a_diagnostic(client: LanguageClient, workspace: Path) -> None:
    text = PARENT.replace('"ada"', "1")
    target = open_doc(client, workspace / "workflows" / "parent.akm", text)
    await published(client, target, lambda d: codes(d) == ["E300"])
    explained = await _hover(client, target, text, "1  ")
    assert "**E300** (error)" in explained and "## What it means" in explained


async def _definition(client: LanguageClient, target: str, text: str, needle: str, after: int = 0) -> lsp.Location:
    result = await client.text_document_definition_async(
        lsp.DefinitionParams(lsp.TextDocumentIdentifier(target), position(text, needle, after))
    )
    assert isinstance(result, lsp.Location), needle
    return result


async def test_go_to_definition(client: LanguageClient, workspace: Path) -> None:
    target = open_doc(client, workspace / "workflows" / "parent.akm")
    await published(client, target, lambda d: not d)
    step = await _definition(client, target, PARENT, "steps.call", 7)
    assert step.uri == target and step.range.start == position(PARENT, "call {")
    param = await _definition(client, target, PARENT, "params.who", 8)
    assert param.range.start == position(PARENT, "who: string")
    child = await _definition(client, target, PARENT, '"workflows/child"', 4)
    assert child.uri == uri(workspace / "workflows" / "child.akm")
    prompt = await _definition(client, target, PARENT, '"prompts/after.md"', 4)
    assert prompt.uri == uri(workspace / "prompts" / "after.md")
    child_target = open_doc(client, workspace / "workflows" / "child.akm")
    script = await _definition(client, child_target, CHILD, '"scripts/tally.sh"', 3)
    assert script.uri == uri(workspace / "scripts" / "tally.sh")


async def _complete(client: LanguageClient, target: str, text: str, version: int) -> list[str]:
    change(client, target, text.replace("|", ""), version)
    offset = text.index("|")
    line = text.count("\n", 0, offset)
    result = await client.text_document_completion_async(
        lsp.CompletionParams(
            lsp.TextDocumentIdentifier(target), lsp.Position(line, offset - text.rfind("\n", 0, offset) - 1)
        )
    )
    items = result.items if isinstance(result, lsp.CompletionList) else (result or [])
    return sorted(i.label for i in items)


async def test_completion(client: LanguageClient, workspace: Path) -> None:
    target = open_doc(client, workspace / "workflows" / "parent.akm")
    await published(client, target, lambda d: not d)
    assert await _complete(client, target, PARENT.replace("steps.call.output.report", "steps.|"), 2) == [
        "call",
        "collect",
    ]
    assert await _complete(client, target, PARENT.replace("steps.call.output.report", "steps.call.output.|"), 3) == [
        "count",
        "report",
    ]
    assert await _complete(
        client, target, PARENT.replace("steps.collect.output.files", "steps.collect.output.|"), 4
    ) == [
        "files",
        "total",
    ]
    assert await _complete(client, target, PARENT.replace("params.who }", "params.| }"), 5) == ["who"]
    in_step = await _complete(client, target, PARENT.replace('    shell "ls"\n', '    shell "ls"\n    |\n'), 6)
    assert {"inputs", "output", "gate", "env", "timeout", "retry", "on_error"} <= set(in_step)
    assert "max_units" not in in_step
    assert await _complete(client, target, PARENT.replace("  step collect", "  limits { | }\n  step collect"), 7) == [
        "concurrency",
        "exclusive",
        "max_tokens",
        "max_units",
        "timeout",
    ]
    assert await _complete(client, target, PARENT.replace('"workflows/child"', '"|"'), 8) == ["workflows/child"]
    assert await _complete(client, target, PARENT.replace("{ name = params.who }", "{ | }"), 9) == ["name"]


async def test_document_symbols(client: LanguageClient, workspace: Path) -> None:
    target = open_doc(client, workspace / "workflows" / "parent.akm")
    result = await client.text_document_document_symbol_async(
        lsp.DocumentSymbolParams(lsp.TextDocumentIdentifier(target))
    )
    assert result is not None
    (workflow,) = result
    assert isinstance(workflow, lsp.DocumentSymbol) and workflow.name == "parent"
    assert [(s.name, s.detail) for s in workflow.children or []] == [
        ("params", None),
        ("collect", "shell"),
        ("call", "uses"),
        ("after", "agent"),
    ]
    assert [p.name for p in (workflow.children or [])[0].children or []] == ["who"]


# -- formatting and code actions ----------------------------------------------------------------------------


def _apply(text: str, edits: Sequence[lsp.TextEdit]) -> str:
    lines = text.split("\n")
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line) + 1)

    def at(p: lsp.Position) -> int:
        return offsets[p.line] + len(text[offsets[p.line] :].encode("utf-16-le")[: p.character * 2].decode("utf-16-le"))

    for edit in sorted(edits, key=lambda e: (e.range.start.line, e.range.start.character), reverse=True):
        text = text[: at(edit.range.start)] + edit.new_text + text[at(edit.range.end) :]
    return text


async def test_formatting(client: LanguageClient, workspace: Path) -> None:
    messy = PARENT.replace("  step collect {\n    shell", "  step   collect{ shell").replace(
        " = params.who", "=params.who"
    )
    target = open_doc(client, workspace / "workflows" / "parent.akm", messy)
    edits = await client.text_document_formatting_async(
        lsp.DocumentFormattingParams(lsp.TextDocumentIdentifier(target), lsp.FormattingOptions(2, True))
    )
    assert edits and _apply(messy, edits) == format_source(messy).text == PARENT
    change(client, target, 'workflow "w" {', 2)
    broken = await client.text_document_formatting_async(
        lsp.DocumentFormattingParams(lsp.TextDocumentIdentifier(target), lsp.FormattingOptions(2, True))
    )
    assert not broken


async def test_code_actions_apply_the_suggestion_or_silence_the_line(client: LanguageClient, workspace: Path) -> None:
    text = PARENT.replace("steps.call.output.report", "steps.cal.output.report")
    target = open_doc(client, workspace / "workflows" / "parent.akm", text)
    (diagnostic,) = await published(client, target, lambda d: bool(d))
    actions = await client.text_document_code_action_async(
        lsp.CodeActionParams(lsp.TextDocumentIdentifier(target), diagnostic.range, lsp.CodeActionContext([diagnostic]))
    )
    assert actions is not None
    by_title = {a.title: a for a in actions if isinstance(a, lsp.CodeAction)}
    fix = by_title["Replace `cal` with `call`"]
    assert fix.edit is not None and fix.edit.changes is not None
    assert _apply(text, list(fix.edit.changes[target])) == PARENT
    silence = by_title["Silence E203 on this line (# akmc: ignore[E203])"]
    assert silence.edit is not None and silence.edit.changes is not None
    silenced = _apply(text, list(silence.edit.changes[target]))
    assert "steps.collect.output.files] # akmc: ignore[E203]\n" in silenced
    change(client, target, silenced, 2)
    assert await published(client, target, lambda d: not d) == []


# -- a server that stays up -----------------------------------------------------------------------------------


async def test_bad_input_never_stops_the_server(client: LanguageClient, workspace: Path) -> None:
    huge = open_doc(client, workspace / "workflows" / "huge.akm", 'workflow "w" {}\n' + "#" * (1024 * 1024))
    assert codes(await published(client, huge, lambda d: bool(d))) == ["E103"]
    surrogate = open_doc(client, workspace / "workflows" / "lone.akm", 'workflow "\ud800" {}\n')
    assert codes(await published(client, surrogate, lambda d: bool(d))) == ["E103"]
    deep = open_doc(
        client, workspace / "workflows" / "deep.akm", 'workflow "w" { params { p: any = ' + "[" * 5000 + "] } }"
    )
    assert codes(await published(client, deep, lambda d: bool(d))) == ["E100"]
    garbage = open_doc(client, workspace / "workflows" / "garbage.akm", '\x00\x01{{{"""')
    assert codes(await published(client, garbage, lambda d: bool(d))) in (["E100"], ["E101"])
    (workspace / "workflows" / "latin1.akm").write_bytes(b'workflow "caf\xe9" {}\n')  # a child that is not UTF-8
    composer = open_doc(
        client,
        workspace / "workflows" / "composer.akm",
        'workflow "c" {\n  step a {\n    uses "workflows/latin1"\n  }\n}\n',
    )
    assert codes(await published(client, composer, lambda d: bool(d))) == ["E408"]
    # Requests about a document the server never saw are answered with null.
    missing = uri(workspace / "nowhere" / "gone.akm")
    for request in (
        client.text_document_hover_async(lsp.HoverParams(lsp.TextDocumentIdentifier(missing), lsp.Position(0, 0))),
        client.text_document_definition_async(
            lsp.DefinitionParams(lsp.TextDocumentIdentifier(missing), lsp.Position(99, 99))
        ),
    ):
        assert await request is None
    # ... and the server still answers.
    target = open_doc(client, workspace / "workflows" / "parent.akm")
    assert await published(client, target, lambda d: not d) == []
    assert "step `call`" in await _hover(client, target, PARENT, "call {")


@pytest_lsp.fixture(  # type: ignore[untyped-decorator]  # pytest-lsp's decorator is unannotated
    config=ClientServerConfig(
        server_command=SERVER.server_command, server_env={**os.environ, "AKMC_LSP_FAULT": "hover"}
    ),
    scope="module",
)
async def faulty_client(lsp_client: LanguageClient) -> AsyncIterator[None]:
    await lsp_client.initialize_session(_params())
    yield
    await lsp_client.shutdown_session()


async def test_a_handler_that_crashes_answers_nothing_and_the_server_goes_on(
    faulty_client: LanguageClient, workspace: Path
) -> None:
    target = open_doc(faulty_client, workspace / "workflows" / "parent.akm")
    assert await published(faulty_client, target, lambda d: not d) == []
    for _ in range(2):
        hover = await faulty_client.text_document_hover_async(
            lsp.HoverParams(lsp.TextDocumentIdentifier(target), position(PARENT, "call {"))
        )
        assert hover is None
    logged = [m.message for m in faulty_client.log_messages if m.type == lsp.MessageType.Error]
    assert len(logged) == 2 and "internal error while answering hover" in logged[0] and "Traceback" in logged[0]
    assert await _definition(faulty_client, target, PARENT, "steps.call", 7)
    change(faulty_client, target, PARENT.replace("params.who", "params.whom"), 2)
    assert codes(await published(faulty_client, target, lambda d: bool(d))) == ["E205"]


async def test_a_child_changed_on_disk_rechecks_the_open_parent(client: LanguageClient, workspace: Path) -> None:
    child, parent = workspace / "workflows" / "child.akm", workspace / "workflows" / "parent.akm"
    target = open_doc(client, parent)
    assert await published(client, target, lambda d: not d) == []
    child.write_text(CHILD.replace("report: string =", "summary: string ="))  # a pull, say
    client.workspace_did_change_watched_files(
        lsp.DidChangeWatchedFilesParams([lsp.FileEvent(uri(child), lsp.FileChangeType.Changed)])
    )
    assert codes(await published(client, target, lambda d: bool(d))) == ["E407"]
