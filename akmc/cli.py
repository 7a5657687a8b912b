"""The `akmc` command line: thin typer commands that call one function and exit with its code."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from akmc import __version__

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
    from akmc.commands import check as command

    raise typer.Exit(command.main(list(ctx.args)))


@app.command()
def explain(code: Annotated[str, typer.Argument(help="A diagnostic code such as E203.")]) -> None:
    """Print the documentation of a diagnostic code.

    Example: akmc explain E203
    """
    from akmc.commands import explain as command

    raise typer.Exit(command.run(code))
