"""editors/vscode: the TextMate grammar's scope tests (vscode-tmgrammar-test, from npm) and the
extension's start-up, run with the real Node wherever Node is installed (it is in CI)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from helpers import REPO

VSCODE = REPO / "editors" / "vscode"
TOOL = VSCODE / "node_modules" / ".bin" / "vscode-tmgrammar-test"
NODE = shutil.which("node")
needs_node = pytest.mark.skipif(NODE is None, reason="Node.js is not installed (CI has it)")


def _grammar_test(*files: Path) -> subprocess.CompletedProcess[str]:
    assert TOOL.exists(), "vscode-tmgrammar-test is missing: `python3 tasks.py test` installs it with npm"
    grammar = VSCODE / "syntaxes" / "akm.tmLanguage.json"
    return subprocess.run(
        [str(TOOL), "-g", str(grammar), *map(str, files)], capture_output=True, text=True, timeout=120, cwd=VSCODE
    )


@needs_node
def test_the_grammar_gives_every_construct_its_scope() -> None:
    tests = sorted((VSCODE / "tests").glob("*.akm.txt"))
    assert tests
    run = _grammar_test(*tests)
    assert run.returncode == 0, run.stdout + run.stderr


@needs_node
def test_a_wrong_scope_fails_the_grammar_test(tmp_path: Path) -> None:
    wrong = tmp_path / "wrong.akm.txt"
    wrong.write_text('# SYNTAX TEST "source.akm"\nworkflow "w" {}\n#        ^^^ comment.line.number-sign.akm\n')
    run = _grammar_test(wrong)
    assert run.returncode != 0 and "missing required scopes" in run.stdout


STUBS = {
    "vscode/index.js": """
exports.workspace = {
  getConfiguration: (section) => ({ get: (key, fallback) => (global.configured ?? fallback) }),
  onDidChangeConfiguration: () => ({ dispose() {} }),
  createFileSystemWatcher: (glob) => ({ glob, dispose() {} }),
};
exports.commands = { registerCommand: (name) => ({ name, dispose() {} }) };
""",
    "vscode-languageclient/node.js": """
exports.TransportKind = { stdio: 0 };
exports.LanguageClient = class {
  constructor(id, name, server, client) { global.started = { id, name, server, client }; }
  start() { return Promise.resolve("started"); }
  stop() { return Promise.resolve(); }
};
""",
}


@needs_node
@pytest.mark.parametrize(
    ("configured", "command"), [(None, ["akmc", "lsp"]), (["/venv/bin/akmc", "lsp"], ["/venv/bin/akmc", "lsp"])]
)
def test_the_extension_starts_the_configured_language_server(
    tmp_path: Path, configured: list[str] | None, command: list[str]
) -> None:
    for name, text in STUBS.items():
        (tmp_path / "node_modules" / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "node_modules" / name).write_text(text)
    shutil.copy(VSCODE / "extension.js", tmp_path / "extension.js")
    script = (
        f"global.configured = {json.dumps(configured)};"
        "const ext = require('./extension.js'); const context = { subscriptions: [] };"
        "ext.activate(context).then((r) => console.log(JSON.stringify({ r, started: global.started,"
        " subscriptions: context.subscriptions.length })));"
    )
    assert NODE is not None
    run = subprocess.run([NODE, "-e", script], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    result = json.loads(run.stdout)
    assert result["r"] == "started" and result["subscriptions"] == 2
    assert [result["started"]["server"]["command"], *result["started"]["server"]["args"]] == command
    assert {"scheme": "file", "language": "akm"} in result["started"]["client"]["documentSelector"]
    assert result["started"]["client"]["synchronize"]["fileEvents"]["glob"] == "**/*.akm"


def test_the_manifest_names_files_that_exist() -> None:
    manifest = json.loads((VSCODE / "package.json").read_text())
    contributes = manifest["contributes"]
    assert (VSCODE / manifest["main"]).is_file()
    assert (VSCODE / contributes["languages"][0]["configuration"]).is_file()
    assert contributes["languages"][0]["extensions"] == [".akm"]
    grammar = json.loads((VSCODE / contributes["grammars"][0]["path"]).read_text())
    assert grammar["scopeName"] == contributes["grammars"][0]["scopeName"] == "source.akm"
    json.loads((VSCODE / "language-configuration.json").read_text())
    lock = json.loads((VSCODE / "package-lock.json").read_text())
    assert "node_modules/vscode-tmgrammar-test" in lock["packages"]
