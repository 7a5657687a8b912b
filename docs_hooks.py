"""MkDocs hooks of the documentation site (mkdocs.yml): the changelog from CHANGELOG.md, and the
diagnostic codes' index and navigation generated from akmc's catalog, so a code added to the
catalog without a page, or a page left for a code the catalog no longer has, fails the build."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.exceptions import PluginError
from mkdocs.structure.files import File, Files

from akmc.diagnostics import CATALOG

ROOT = Path(__file__).resolve().parent
INDEX = ROOT / "docs" / "diagnostics" / "index.md"
# The docs' own fence attributes, which the tests read: ```akm file=workflows/x.akm names the file
# a block is (shown as the block's title on the site), ```akm case=E501-x is a checker case,
# ```akm fragment a part of a workflow, ```sh run a block tests/e2e/test_docs_run.py runs,
# ```sh illustrative one it does not run (it needs a server, a network, a repository, a release;
# a few of these a test of their own runs: the git textconv set-up, the akm-run examples).
FENCE_ATTRIBUTES = re.compile(r"^(\s*```\w+) (?:file=(\S+)|case=\S+|fragment|run|illustrative)$", re.M)


def on_config(config: MkDocsConfig) -> MkDocsConfig:
    """Expand the navigation's `diagnostics/index.md` entry into the index and one page per code."""
    pages: list[Any] = [{"All codes": "diagnostics/index.md"}]
    pages += [{f"{code}: {CATALOG[code].summary}": f"diagnostics/{code}.md"} for code in sorted(CATALOG)]
    nav = config["nav"]
    for index, entry in enumerate(nav):
        if entry == {"Diagnostics": "diagnostics/index.md"}:
            nav[index] = {"Diagnostics": pages}
    return config


def on_files(files: Files, config: MkDocsConfig) -> Files:
    pages = {Path(f.src_uri).stem for f in files if f.src_uri.startswith("diagnostics/") and f.src_uri.endswith(".md")}
    missing, unknown = sorted(set(CATALOG) - pages), sorted(pages - set(CATALOG) - {"index"})
    if missing or unknown:
        raise PluginError(
            f"diagnostic pages: missing for {missing or 'none'}, for no catalog code: {unknown or 'none'}"
        )
    if INDEX.read_text(encoding="utf-8") != index():
        raise PluginError(f"{INDEX.relative_to(ROOT)} does not list the catalog: `python3 docs_hooks.py` rewrites it")
    # CHANGELOG.md stands beside docs/, so its links into docs/ lose that prefix on the site.
    changelog = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8").replace("](docs/", "](")
    files.append(File.generated(config, "changelog.md", content=changelog))
    return files


def on_page_markdown(markdown: str, **_: Any) -> str:
    markdown = markdown.replace("](../CHANGELOG.md)", "](changelog.md)")  # the changelog's place on the site
    return FENCE_ATTRIBUTES.sub(lambda m: m.group(1) + (f' title="{m.group(2)}"' if m.group(2) else ""), markdown)


def index() -> str:
    """docs/diagnostics/index.md: every code of the catalog, with its severity and summary."""
    rows = [f"| [{code}]({code}.md) | {CATALOG[code].severity} | {CATALOG[code].summary} |" for code in sorted(CATALOG)]
    return "\n".join(
        [
            "# Diagnostic codes",
            "",
            "Every code `akmc` reports, with its severity; each page says what it means, shows an",
            "example and says how to fix it. `akmc explain CODE` prints the same page.",
            "",
            "| code | severity | summary |",
            "| --- | --- | --- |",
            *rows,
            "",
        ]
    )


if __name__ == "__main__":
    INDEX.write_text(index(), encoding="utf-8")
    print(f"wrote {INDEX.relative_to(ROOT)}")
