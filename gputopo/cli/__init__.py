"""The typer command line: parse options, call sources/analysis, hand results to views.

Each command lives in its own module here and registers itself on ``app`` with ``@command``, which
turns a ``GputopoError`` into one line on standard error and the error's exit code (no traceback);
usage errors (an unknown option, a missing value) are one such line too, with exit code 2. The exit
codes are in docs/exit-codes.md.
"""

from __future__ import annotations

import errno
import functools
import importlib
import sys
from typing import Annotated, Any, Callable, Iterable, Optional, Sequence

import typer
from typer.core import TyperGroup

from gputopo.errors import (
    EXIT_CHECK_FAILED,
    EXIT_ENVIRONMENT,
    EXIT_PIPE_CLOSED,
    EXIT_USAGE,
    GputopoError,
)


class _OneLineErrorsGroup(TyperGroup):
    """The command group whose usage errors are one ``gputopo: error:`` line and exit code 2, like
    every other error (typer would draw a 5-6 line box). ``main`` is what both the console script
    and the test runner (``CliRunner``) call, so both behave the same."""

    def main(self, args: Sequence[str] | None = None, prog_name: str | None = None,  # type: ignore[override]
             complete_var: str | None = None, standalone_mode: bool = True, **extra: Any) -> Any:
        try:
            from typer._click.exceptions import (
                ClickException,  # typer vendors click since 0.2x
            )
        except ImportError:
            from click.exceptions import ClickException  # type: ignore[no-redef]

        prog_name = prog_name or "gputopo"  # not "python -m gputopo" or "__main__.py" in messages
        for param in self.params:  # typer's installer writes through links, $HOME unquoted: ours instead
            if param.name == "install_completion":
                param.callback = _install_completion
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        try:
            result = super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        except ClickException as exc:
            if type(exc).__name__ == "NoArgsIsHelpError":  # `gputopo` alone: the help was shown
                sys.exit(exc.exit_code)
            ctx = getattr(exc, "ctx", None)
            # click's parser raises some usage errors (an option without its value) with no context:
            # the command named in the arguments is the one whose help to point at.
            named = _command_named(list(args) if args is not None else sys.argv[1:])
            path = ctx.command_path if ctx is not None else f"{prog_name} {named}" if named else prog_name
            hint = f" (see '{path} --help')"
            from gputopo.quoting import terminal_safe

            typer.echo(f"gputopo: error: {terminal_safe(' '.join(exc.format_message().split()))}{hint}", err=True)
            sys.exit(EXIT_USAGE if exc.exit_code == 2 else exc.exit_code)
        except typer.Abort:
            typer.echo("gputopo: error: aborted", err=True)
            sys.exit(EXIT_CHECK_FAILED)
        # Without standalone mode click returns an Exit's code, or the command's return value.
        sys.exit(result if isinstance(result, int) and not isinstance(result, bool) else 0)


def _install_completion(ctx: Any, param: Any, value: Any) -> Any:
    """``--install-completion``: gputopo.cli.completion's installer (imported only when used)."""
    from gputopo.cli.completion import install_callback

    return install_callback(ctx, param, value)


# The application; ``app`` (below) is this one with every command registered.
_app = typer.Typer(
    cls=_OneLineErrorsGroup,
    name="gputopo",
    help="How your NVIDIA GPUs are wired, how fast they talk, and which ones to train on together.",
    no_args_is_help=True,
    # typer's --install-completion (with gputopo.cli.completion's installer) / --show-completion;
    # -h is help on every command.
    add_completion=True,
    context_settings={"help_option_names": ["-h", "--help"]},
    pretty_exceptions_enable=False,
)


def _show_version(value: bool) -> None:
    if value:
        from gputopo import __version__

        typer.echo(f"gputopo {__version__}")
        raise typer.Exit()


@_app.callback()
def _root(
    version: Annotated[
        bool, typer.Option("--version", "-V", callback=_show_version, is_eager=True, help="Print the version and exit.")
    ] = False,
) -> None:
    """How your NVIDIA GPUs are wired, how fast they talk, and which ones to train on together."""


MAX_ERROR_CHARS = 2000  # an input echoed into an error (a 12 MB table cell) is cut, not printed whole


def fail(message: str, exit_code: int = 2) -> typer.Exit:
    """Print ``gputopo: error: message`` on standard error and return the Exit to raise: one line,
    bounded, and no control character (an escape sequence from a file name or an NVML process name)
    reaches the terminal."""
    from gputopo.quoting import terminal_safe

    line = terminal_safe(" ".join(message.split()))
    if len(line) > MAX_ERROR_CHARS:
        line = line[: MAX_ERROR_CHARS - 3] + "..."
    typer.echo(f"gputopo: error: {line}", err=True)
    return typer.Exit(exit_code)


def command(*args: Any, **kwargs: Any) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """``app.command`` that maps user errors to one clear line and the error's exit code (2 for
    bad input, 3 for the environment, 1 for a failed check); an output that cannot be written (disk
    full, closed pipe) is one line too."""

    def decorate(fn: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(fn)
        def wrapper(*f_args: Any, **f_kwargs: Any) -> Any:
            from gputopo.views.common import OUTPUT_ERRNOS, silence_stdout

            try:
                return fn(*f_args, **f_kwargs)
            except GputopoError as exc:
                if getattr(exc, "quiet", False):  # the pipe's reader left (`| head`): nothing to say
                    raise typer.Exit(exc.exit_code) from None
                raise fail(str(exc), exc.exit_code) from None
            except KeyboardInterrupt:
                raise fail("interrupted", 130) from None
            except OSError as exc:  # a write the views' guarded streams did not see (typer.echo)
                if exc.errno not in OUTPUT_ERRNOS:
                    raise
                silence_stdout()
                if exc.errno == errno.EPIPE:
                    raise typer.Exit(EXIT_PIPE_CLOSED) from None
                raise fail(f"cannot write the output: {exc.strerror or exc}", EXIT_ENVIRONMENT) from None

        if fn.__doc__ and "help" not in kwargs:
            kwargs["help"] = one_line_paragraphs(fn.__doc__)
            kwargs.setdefault("short_help", first_sentence(kwargs["help"]))
        return _app.command(*args, **kwargs)(wrapper)

    return decorate


def first_sentence(text: str) -> str:
    """What `gputopo -h` lists beside a command: its help's first sentence."""
    import re

    first = re.split(r"(?<=\.)\s+(?=[A-Z-])", text.split("\n\n")[0], maxsplit=1)[0]
    return first if first.endswith(".") else first + "."


def one_line_paragraphs(doc: str) -> str:
    """A docstring as help: each paragraph one line (the terminal wraps it at its own width, not at
    the docstring's line breaks), paragraphs apart by a blank line."""
    import inspect

    paragraphs = inspect.cleandoc(doc).split("\n\n")
    return "\n\n".join(" ".join(paragraph.split()) for paragraph in paragraphs if paragraph.strip())


# Help panels: a command with many options groups them (`gputopo train -h`); the shared options of
# every command are under "Inputs" and "Output" wherever they appear.
PANEL_INPUTS = "Inputs"
PANEL_OUTPUT = "Output"


def _starting(values: Iterable[str], incomplete: str) -> list[str]:
    return [value for value in values if value.startswith(incomplete)]


# Completion of values (`gputopo scan --machine <TAB>`): each imports what it lists only when asked.
def complete_machine(incomplete: str) -> list[str]:
    """The reference machines' names."""
    from gputopo.sources.reference import machine_names

    return _starting(machine_names(), incomplete)


def complete_fail_on(incomplete: str) -> list[str]:
    """``--fail-on``'s levels."""
    return _starting(("warning", "error"), incomplete)


def complete_strategy(incomplete: str) -> list[str]:
    """``train --strategy``'s strategies."""
    from gputopo.train.config import STRATEGIES

    return _starting(STRATEGIES, incomplete)


def complete_recommend_format(incomplete: str) -> list[str]:
    """``recommend --format``'s formats, one host's and several hosts' together."""
    formats = ("text", "json", "env", "python", "slurm", "gres", "slurm-topology")
    return _starting(formats, incomplete)


# Options shared by every command that reads a topology; they become one ``TopologyRequest``.
# `--from` is repeatable everywhere: several files of one host are merged (a `topo -m` and a
# bandwidth test of the same box); snapshots naming different hosts are several hosts, which `scan`
# and `recommend` take and the others refuse in one line.
FromOption = Annotated[
    Optional[list[str]],
    typer.Option(
        "--from",
        help="Topology from FILE ('-': stdin): any output docs/inputs.md lists; repeatable.",
        metavar="FILE",
        rich_help_panel=PANEL_INPUTS,
    ),
]


HostOption = Annotated[
    Optional[str],
    typer.Option(
        "--host",
        help="Name the host this topology is of (text, TF logs and reference machines do not say; "
        "a --save snapshot keeps it).",
        metavar="NAME",
        rich_help_panel=PANEL_INPUTS,
    ),
]
MachineOption = Annotated[
    Optional[str],
    typer.Option("--machine", "-m", help="Use a built-in reference machine (see `gputopo machines`).", metavar="NAME",
                 autocompletion=complete_machine, rich_help_panel=PANEL_INPUTS),
]
TfLogOption = Annotated[
    Optional[str],
    typer.Option("--tf-log", help="Read TensorFlow's device log and cross-check it ('-' = stdin).", metavar="FILE",
                 rich_help_panel=PANEL_INPUTS),
]
TfRunOption = Annotated[
    Optional[int],
    typer.Option("--tf-run", help="Which TensorFlow start-up of --tf-log to read (default: the one that says most).",
                 metavar="N", rich_help_panel=PANEL_INPUTS),
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print machine-readable JSON instead of tables.",
                                          rich_help_panel=PANEL_OUTPUT)]


# Command name -> the module under gputopo.cli that registers it, in the order `gputopo --help` lists them.
COMMAND_MODULES = {
    "scan": "scan",
    "machines": "machines",
    "recommend": "recommend",
    "bench-p2p": "bench",
    "train": "train",
    "report": "report",
    "doctor": "doctor",
    "gather": "doctor",
    "watch": "watch",
    "nccl-topo": "nccl_topo",
}


def register_commands(names: Iterable[str] = COMMAND_MODULES) -> typer.Typer:
    """Import the modules that register ``names`` (all commands by default) and return the app.

    A command's module is imported, and its options built, only when it is used: typer builds
    every registered command's options on each start, which costs more than a whole `scan`."""
    for name in names:
        importlib.import_module(f"gputopo.cli.{COMMAND_MODULES[name]}")
    order = list(COMMAND_MODULES)
    _app.registered_commands.sort(key=lambda info: order.index(info.name) if info.name in order else len(order))
    return _app


def __getattr__(name: str) -> Any:
    """``gputopo.cli.app``: the application with every command registered (tests, help, docs)."""
    if name == "app":
        return register_commands()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _command_named(args: Sequence[str]) -> str | None:
    """The command that ``args`` runs, if it names a known one; None for `gputopo`, `--help`,
    `--version` or a misspelt name (those need every command, for the list or a suggestion)."""
    first = next((arg for arg in args if not arg.startswith("-")), None)
    root_only = ("--help", "-h", "--version", "-V", "--install-completion", "--show-completion")
    if first is None or any(arg in root_only for arg in args[: args.index(first)]):
        return None
    return first if first in COMMAND_MODULES else None


def main() -> None:
    """Console-script entry point: registers only the command that is run (see register_commands)."""
    named = _command_named(sys.argv[1:])
    try:
        register_commands([named] if named else COMMAND_MODULES)()
    except KeyboardInterrupt:
        typer.echo("gputopo: error: interrupted", err=True)
        sys.exit(130)
