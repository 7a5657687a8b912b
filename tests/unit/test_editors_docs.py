"""The editor set-ups in docs/editors.md name the real commands (Neovim and Helix are not run here;
VS Code's extension is, in tests/e2e/test_vscode.py)."""

from __future__ import annotations

import re
import tomllib

from akmc.cli import app
from helpers import REPO

EDITORS = (REPO / "docs" / "editors.md").read_text()


def _block(fence: str) -> str:
    match = re.search(rf"```{fence}\n(.*?)```", EDITORS, re.S)
    assert match is not None, fence
    return match.group(1)


def _commands() -> set[str]:
    return {c.name or (c.callback.__name__ if c.callback else "") for c in app.registered_commands}


def test_helix_configuration_parses_and_names_akmc_lsp_and_fmt() -> None:
    config = tomllib.loads(_block("toml"))
    (language,) = config["language"]
    assert language["file-types"] == ["akm"] and language["language-servers"] == ["akmc"]
    server = config["language-server"]["akmc"]
    assert [server["command"], *server["args"]] == ["akmc", "lsp"]
    assert [language["formatter"]["command"], *language["formatter"]["args"]] == ["akmc", "fmt", "-"]
    assert {"lsp", "fmt"} <= _commands()


def test_neovim_configuration_starts_akmc_lsp_for_akm_files() -> None:
    lua = _block("lua")
    assert 'cmd = { "akmc", "lsp" }' in lua and 'filetypes = { "akm" }' in lua
    assert 'extension = { akm = "akm" }' in lua and 'vim.lsp.enable("akmc")' in lua
