"""The `akmc` command line: thin typer commands that call one function and exit with its code."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from akmc import __version__

# COMMAND_IMPORT: each command imports its module (the schema command: json and the schema) when it
# runs: together they cost over 0.2 s of start-up (the compiler's stages about 70 ms, jsonschema
# about 60 ms, the plan verifier, the renderers), which `akmc --help` and every other command would pay.

app = typer.Typer(
    name="akmc",
    help="Compile and check .akm workflows into verified, canonical plan files.",
    no_args_is_help=True,
    add_completion=True,
    rich_markup_mode=None,
    pretty_exceptions_enable=False,
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"akmc {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        Optional[bool], typer.Option("--version", callback=_version, is_eager=True, help="Print the version and exit.")
    ] = None,
) -> None:
    """Compile and check .akm workflows into verified, canonical plan files."""


@app.command(
    context_settings={"ignore_unknown_options": True, "allow_extra_args": True, "help_option_names": []},
    add_help_option=False,
)
def check(ctx: typer.Context) -> None:
    """Check workflows and report diagnostics; write nothing (see `akmc check --help`).

    Example: akmc check workflows/ --format json
    """
    from akmc.commands import check as command  # COMMAND_IMPORT

    raise typer.Exit(command.main(list(ctx.args)))


@app.command()
def explain(
    code: Annotated[
        Optional[str], typer.Argument(help="A diagnostic code such as E203; none lists every code.")
    ] = None,
) -> None:
    """Print the documentation of a diagnostic code, or list every code with its summary.

    Example: akmc explain E203
    """
    from akmc.commands import explain as command  # COMMAND_IMPORT

    raise typer.Exit(command.run(code))


RootOption = Annotated[Optional[Path], typer.Option(help="Workspace root (default: nearest akm.toml, else .git).")]


@app.command("compile")
def compile_(
    source: Annotated[Path, typer.Argument(help="A .akm file, or a directory with --out-dir.")],
    output: Annotated[
        Optional[Path], typer.Option("-o", "--output", help="Plan file to write (default: stdout).")
    ] = None,
    out_dir: Annotated[Optional[Path], typer.Option("--out-dir", help="Write <ref>.plan.json files here.")] = None,
    check: Annotated[
        bool, typer.Option("--check", help="Compare with existing plan files; exit 1 when stale.")
    ] = False,
    root: RootOption = None,
) -> None:
    """Compile workflows to plan files.

    Example: akmc compile workflows/ --out-dir plans/ --check
    """
    from akmc.commands import compile as command  # COMMAND_IMPORT

    raise typer.Exit(command.run(source, output=output, out_dir=out_dir, check=check, root=root))


FormatOption = Annotated[str, typer.Option("--format", help="text, json or markdown (for pull-request comments).")]


def _format(value: str) -> str:
    if value not in ("text", "json", "markdown"):
        raise typer.BadParameter("--format takes text, json or markdown")
    return value


@app.command()
def plan(
    source: Annotated[Path, typer.Argument(help="A .akm source, or a plan file (verified first).")],
    output_format: FormatOption = "text",
    summary: Annotated[
        bool, typer.Option("--summary", help="Only the short list, without command, prompt or approval texts.")
    ] = False,
    root: RootOption = None,
) -> None:
    """Print everything a workflow will run, for review; write nothing.

    Example: akmc plan workflows/release.akm
    """
    from akmc.commands import plan as command  # COMMAND_IMPORT

    raise typer.Exit(command.run(source, output_format=_format(output_format), summary=summary, root=root))


@app.command()
def diff(
    paths: Annotated[
        Optional[list[Path]],
        typer.Argument(help="OLD NEW (plan files or sources); with --rev, the workflows or directories to compare."),
    ] = None,
    revision: Annotated[
        Optional[str],
        typer.Option(
            "--rev", help="Compare every workflow of the workspace at this git revision with the working tree."
        ),
    ] = None,
    output_format: FormatOption = "text",
    root: RootOption = None,
) -> None:
    """Show everything that changed between two plans, or between a git revision and the working tree.

    Exit 0 when equal, 1 when they differ, 2 on errors (a source with errors does not "differ").

    Example: akmc diff --rev origin/main --format markdown
    """
    from akmc.commands import diff as command  # COMMAND_IMPORT

    raise typer.Exit(command.run(paths or [], revision=revision, output_format=_format(output_format), root=root))


@app.command()
def graph(
    source: Annotated[Path, typer.Argument(help="A .akm source, or a plan file (verified first).")],
    output_format: Annotated[str, typer.Option("--format", help="mermaid or dot.")] = "mermaid",
    depth: Annotated[
        Optional[int],
        typer.Option("--depth", min=0, help="Child workflows shown as clusters down to this depth (default: all)."),
    ] = None,
    root: RootOption = None,
) -> None:
    """Draw a workflow: steps in spine order, data references, route cases, maps, child workflows as clusters.

    Example: akmc graph workflows/release.akm --format dot | dot -Tsvg > release.svg
    """
    from akmc.commands import graph as command  # COMMAND_IMPORT

    if output_format not in ("mermaid", "dot"):
        raise typer.BadParameter("--format takes mermaid or dot")
    raise typer.Exit(command.run(source, output_format=output_format, depth=-1 if depth is None else depth, root=root))


@app.command()
def fmt(
    paths: Annotated[
        Optional[list[Path]], typer.Argument(help="Files and directories to format (default: .); `-` for stdin.")
    ] = None,
    check: Annotated[
        bool, typer.Option("--check", help="Write nothing; list the files that would change and exit 1 if any.")
    ] = False,
    show_diff: Annotated[
        bool, typer.Option("--diff", help="Write nothing; print what would change as a diff and exit 1 if any.")
    ] = False,
) -> None:
    """Print .akm sources in the one canonical layout, in place (comments, strings and text blocks kept).

    Example: akmc fmt workflows/ --check
    """
    from akmc.commands import fmt as command  # COMMAND_IMPORT

    raise typer.Exit(command.run(paths or [], check=check, diff=show_diff))


@app.command()
def lsp() -> None:
    """Run the language server over stdio (needs `pip install 'akmc[lsp]'`).

    Example: akmc lsp
    """
    from akmc.commands import lsp as command  # COMMAND_IMPORT

    raise typer.Exit(command.run())


SignatureOption = Annotated[
    Optional[Path], typer.Option("--signature", help="The plan's signature file (default: PLAN.sig).")
]


@app.command()
def verify(
    plan_file: Annotated[Path, typer.Argument(help="A plan file.")],
    allowed_signers: Annotated[
        Optional[Path],
        typer.Option(
            "--allowed-signers", help="Also require a valid signature by a signer this file (git's format) allows."
        ),
    ] = None,
    signature: SignatureOption = None,
) -> None:
    """Verify a plan file as the runtime does; exit 0 or 4.

    Example: akmc verify plans/workflows/release.plan.json --allowed-signers allowed_signers
    """
    from akmc.commands import verify as command  # COMMAND_IMPORT

    raise typer.Exit(command.run(plan_file, allowed_signers, signature))


@app.command()
def sign(
    plans: Annotated[list[Path], typer.Argument(help="Plan files (each verified first).")],
    key: Annotated[
        Path, typer.Option("--key", help="The SSH private key, or a public key whose private half is in ssh-agent.")
    ],
    signature: SignatureOption = None,
) -> None:
    """Sign plan files: an SSH signature (namespace akm-plan) over each file's exact bytes, in PLAN.sig.

    Example: akmc sign plans/workflows/*.plan.json --key ~/.ssh/ci_ed25519
    """
    from akmc.commands import sign as command  # COMMAND_IMPORT

    raise typer.Exit(command.run(plans, key, signature))


@app.command("hash")
def hash_(
    path: Annotated[Path, typer.Argument(help="A .akm source or a plan file.")],
    root: RootOption = None,
) -> None:
    """Print the plan hash of a source or a plan file.

    Example: akmc hash workflows/release.akm
    """
    from akmc.commands import verify as command  # COMMAND_IMPORT

    raise typer.Exit(command.hash_of(path, root))


@app.command()
def schema() -> None:
    """Print the JSON Schema of the plan file format.

    Example: akmc schema > plan.schema.json
    """
    import json  # COMMAND_IMPORT

    from akmc.planschema import plan_file_schema  # COMMAND_IMPORT

    typer.echo(json.dumps(plan_file_schema(), indent=2, sort_keys=True))
