"""The typer command line: parse options, call sources/analysis, hand results to views.

Each command lives in its own module here and registers itself on ``app`` with ``@command``, which
turns a ``GputopoError`` into one line on standard error and exit code 2 (no traceback).
"""

from __future__ import annotations

import functools
import sys
from typing import Any, Callable, Optional

import typer
from typing_extensions import Annotated

from gputopo.errors import GputopoError

app = typer.Typer(
    name="gputopo",
    help="How your NVIDIA GPUs are wired, how fast they talk, and which ones to train on together.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _show_version(value: bool) -> None:
    if value:
        from gputopo import __version__

        typer.echo(f"gputopo {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool, typer.Option("--version", callback=_show_version, is_eager=True, help="Print the version and exit.")
    ] = False,
) -> None:
    """How your NVIDIA GPUs are wired, how fast they talk, and which ones to train on together."""


def fail(message: str, exit_code: int = 2) -> typer.Exit:
    """Print ``gputopo: error: message`` on standard error and return the Exit to raise."""
    typer.echo(f"gputopo: error: {message}", err=True)
    return typer.Exit(exit_code)


def command(*args: Any, **kwargs: Any) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """``app.command`` that maps user errors to one clear line and exit code 2."""

    def decorate(fn: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(fn)
        def wrapper(*f_args: Any, **f_kwargs: Any) -> Any:
            try:
                return fn(*f_args, **f_kwargs)
            except GputopoError as exc:
                raise fail(str(exc), exc.exit_code) from None
            except KeyboardInterrupt:
                raise fail("interrupted", 130) from None

        return app.command(*args, **kwargs)(wrapper)

    return decorate


# Options shared by every command that reads a topology.
FromOption = Annotated[
    Optional[str],
    typer.Option(
        "--from",
        help="Read the topology from a saved snapshot (JSON) or `nvidia-smi topo -m` text ('-' = stdin).",
        metavar="FILE",
    ),
]
MachineOption = Annotated[
    Optional[str],
    typer.Option("--machine", "-m", help="Use a built-in reference machine (see `gputopo machines`).", metavar="NAME"),
]
TfLogOption = Annotated[
    Optional[str],
    typer.Option("--tf-log", help="Read TensorFlow's device log and cross-check it ('-' = stdin).", metavar="FILE"),
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print machine-readable JSON instead of tables.")]


def main() -> None:
    """Console-script entry point."""
    try:
        app()
    except KeyboardInterrupt:
        typer.echo("gputopo: error: interrupted", err=True)
        sys.exit(130)


# Register the commands (each module only imports light modules at import time).
from gputopo.cli import scan as _scan  # noqa: E402,F401
from gputopo.cli import machines as _machines  # noqa: E402,F401
from gputopo.cli import recommend as _recommend  # noqa: E402,F401
from gputopo.cli import bench as _bench  # noqa: E402,F401
from gputopo.cli import train as _train  # noqa: E402,F401
from gputopo.cli import report as _report  # noqa: E402,F401
