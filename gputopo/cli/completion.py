"""``gputopo --install-completion``: typer's installer, made safe to run as root.

typer's own installer (``typer._completion_shared.install_*``) writes ``~/.bashrc`` and the script
with ``Path.write_text``, through any symbolic link, and puts ``$HOME`` into ``.bashrc`` inside single
quotes that a quote in the path ends (``source '/home/a'$(...)'/...'``). This one writes the same
files (the script typer's ``--show-completion`` prints, the line that loads it) under these rules:

- ``$HOME`` must be an absolute path to a folder owned by whoever runs gputopo: root with another
  user's ``HOME`` (``sudo -E``) is refused, so root never writes into someone else's files;
- nothing written or created there may be a symbolic link, nor a folder on the way to it below
  ``$HOME``: refused (the kernel would follow it anywhere), everything checked before anything is
  written; a start-up file must be a regular file with one link (``fileio.read_regular``);
- folders are created one at a time, files written with ``fileio.atomic_write_text``;
- a path in the start-up file is one shell word (``quoting.shell_word``).

bash, zsh and fish, as typer installs them; any other shell is one line naming ``--show-completion``.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import typer

from gputopo.errors import InputError

PROG_NAME = "gputopo"
COMPLETE_VAR = "_GPUTOPO_COMPLETE"
MAX_RC_BYTES = 4 * 1024 * 1024  # a start-up file larger than this is not one gputopo should rewrite


@dataclass(frozen=True)
class Plan:
    """What installing for one shell writes: the script (relative to ``$HOME``), the start-up file
    (relative, or None) and the lines it must hold."""

    script: str
    rc_file: str | None
    rc_lines: tuple[str, ...]


def plan_for(shell: str, home: Path) -> Plan:
    """Where typer installs for ``shell``, with ``home`` quoted where it is written."""
    from gputopo.quoting import shell_word

    if shell == "bash":
        script = f".bash_completions/{PROG_NAME}.sh"
        return Plan(script, ".bashrc", (f"source {shell_word(str(home / script), 'the completion script path')}",))
    if shell == "zsh":  # typer's lines: no path of ours in them
        return Plan(f".zfunc/_{PROG_NAME}", ".zshrc",
                    ("fpath+=~/.zfunc; autoload -Uz compinit; compinit", "zstyle ':completion:*' menu select"))
    if shell == "fish":
        return Plan(f".config/fish/completions/{PROG_NAME}.fish", None, ())
    raise InputError(f"cannot install completion for {shell or 'this shell (not detected)'}: gputopo installs it for "
                     f"bash, zsh and fish; add the output of `gputopo --show-completion SHELL` to your shell's "
                     "start-up file yourself")


def _home() -> Path:
    """``$HOME``, when it is an absolute path to a folder of the user running gputopo."""
    from gputopo.fileio import protected_link
    from gputopo.quoting import first_control

    text = os.environ.get("HOME", "")
    home = Path(text)
    if not text or not home.is_absolute():
        raise InputError(f"cannot install completion: HOME ({text!r}) is not an absolute path")
    if first_control(text) is not None:  # (a byte no UTF-8 decoder took, as '\udc9b': no shell line can hold it)
        raise InputError(f"cannot install completion: HOME ({text[:80]!r}) holds a control character or a byte "
                         "that is not text; install it yourself with `gputopo --show-completion`")
    refused = protected_link(home)  # checked before anything is made under it (review: a folder was)
    if refused is not None:
        raise InputError(f"cannot install completion: {refused}")
    try:
        st = os.stat(home)
    except OSError as exc:
        raise InputError(f"cannot install completion: HOME {home}: {exc.strerror or exc}") from None
    if not stat.S_ISDIR(st.st_mode):
        raise InputError(f"cannot install completion: HOME {home} is not a folder")
    if st.st_uid != os.geteuid():
        raise InputError(f"cannot install completion: HOME {home} belongs to uid {st.st_uid}, not to you "
                         f"(uid {os.geteuid()}); run it as that user")
    return home


def _check_no_link(home: Path, relative: str) -> None:
    """Refuse ``relative`` (or a folder on its way below ``home``) where it is a symbolic link or a
    folder is not a folder."""
    parts = Path(relative).parts
    for depth in range(1, len(parts) + 1):
        path = home.joinpath(*parts[:depth])
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            return
        except OSError as exc:
            raise InputError(f"cannot install completion: {path}: {exc.strerror or exc}") from None
        if stat.S_ISLNK(st.st_mode):
            raise InputError(f"cannot install completion: {path} is a symbolic link, which gputopo does not "
                             f"write through; install it yourself with `gputopo --show-completion`")
        if depth < len(parts) and not stat.S_ISDIR(st.st_mode):
            raise InputError(f"cannot install completion: {path} is not a folder")


def _make_folders(home: Path, relative: str) -> None:
    """The folders of ``relative`` below ``home``, made one at a time (none is a link: checked)."""
    parts = Path(relative).parts[:-1]
    for depth in range(1, len(parts) + 1):
        try:
            os.mkdir(home.joinpath(*parts[:depth]), 0o755)
        except FileExistsError:
            pass
        except OSError as exc:
            raise InputError(f"cannot install completion: {home.joinpath(*parts[:depth])}: {exc.strerror or exc}") from None


def install(shell: str) -> Path:
    """Install completion for ``shell`` in ``$HOME``; the script's path. ``InputError`` (nothing
    written) where a rule of the module is broken; ``OutputError`` where a write fails."""
    from typer.completion import get_completion_script

    from gputopo.fileio import atomic_write_bytes, atomic_write_text, read_regular

    home = _home()
    plan = plan_for(shell, home)
    written = [plan.script] + ([plan.rc_file] if plan.rc_file else [])
    for relative in written:
        _check_no_link(home, relative)
    # The start-up file as bytes: whatever its encoding, only lines are added to it.
    rc_data = (read_regular(home / plan.rc_file, "start-up file", MAX_RC_BYTES) or b"") if plan.rc_file else b""
    script = get_completion_script(prog_name=PROG_NAME, complete_var=COMPLETE_VAR, shell=shell)
    _make_folders(home, plan.script)
    atomic_write_text(home / plan.script, script)
    missing = [line for line in plan.rc_lines if line.encode() not in rc_data]
    if shell == "zsh" and b"zstyle" in rc_data:  # as typer: a user's own zstyle stays theirs
        missing = [line for line in missing if not line.startswith("zstyle")]
    if plan.rc_file and missing:
        separator = b"" if not rc_data or rc_data.endswith(b"\n") else b"\n"
        atomic_write_bytes(home / plan.rc_file, rc_data + separator + "".join(f"{line}\n" for line in missing).encode())
    return home / plan.script


def _detected_shell() -> str | None:
    try:
        from typer._completion_shared import _get_shell_name
    except ImportError:  # another typer: the login shell
        return os.path.basename(os.environ.get("SHELL", "")) or None
    return _get_shell_name()


def install_callback(ctx: Any, param: Any, value: Any) -> Any:
    """The ``--install-completion`` option's callback, in place of typer's ``install_callback``."""
    if not value or ctx.resilient_parsing:
        return value
    from gputopo.cli import fail
    from gputopo.errors import GputopoError

    shell = getattr(value, "value", value) if isinstance(value, str) else _detected_shell()  # typer's Shells enum
    try:
        path = install(shell or "")
    except GputopoError as exc:
        raise fail(str(exc), exc.exit_code) from None
    typer.echo(f"{shell} completion installed in {path}")
    typer.echo("Completion will take effect once you restart the terminal")
    raise typer.Exit(0)
