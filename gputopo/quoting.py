"""Every string from an input is data: one quoting or checking function per place it is written to.

gputopo writes strings that came from snapshots, plans, NVML, sysfs or the command line into text
that something else interprets: shell lines (``recommend --format env``, the sbatch scripts, the
"exact command" of ``train``), Python source (``recommend --format python``), a terminal, rich
markup. Each target has its function here, and nothing else writes such a string into such text:

- shell: ``shell_word`` (``shlex.quote``; a control character, newline included, is refused:
  such a value cannot be meant and would be shown raw by a terminal); ``env_name`` refuses a
  variable name that is not ``[A-Za-z_][A-Za-z0-9_]*``; ``slurm_node`` a node name an ``#SBATCH``
  line (or a gres.conf / topology.conf line) cannot carry; ``slurm_gres_type`` a GPU name as a
  gres.conf ``Type=`` word;
- XML (``nccl-topo``): ``xml_attr`` (a quoted attribute value, control characters refused) and
  ``xml_comment`` (a comment the text cannot end);
- comments (shell and Python): ``comment`` keeps the text on its one line (control characters
  dropped, so a newline cannot end the comment and start a command);
- Python source: ``python_str`` (``repr``: a string literal, never code);
- the terminal: ``terminal_safe`` drops control characters (escape sequences, bell, backspace,
  carriage return) but keeps newlines and tabs; rich markup is never parsed from input (the views
  hand rich ``Text``, not markup strings);
- at the door (snapshot, plan): ``check_text`` refuses a control character in a name, naming the
  field (``gpus[0].host: control character '\\n' ...``).
"""

from __future__ import annotations

import re
import shlex

from gputopo.errors import InputError

# Every C0 control (newline and tab included), DEL, every C1 control, and the Unicode line and
# paragraph separators some editors and terminals break lines at.
# Bidirectional overrides and isolates (U+202A-U+202E, U+2066-U+2069) and marks (ALM U+061C, LRM
# U+200E, RLM U+200F: the rest of Unicode's Bidi_Control) reorder what the terminal shows: a name
# can look like another ("Trojan Source"). They go with the control characters, and so
# do lone surrogates (U+D800-U+DFFF: no text; a JSON escape, or a byte no UTF-8 decoder took, such as
# the 8-bit CSI 0x9b of a file name read with surrogateescape, which a terminal would act on).
_CONTROL_RE = re.compile(r"[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff]")
# What the terminal may see: the same without newline and tab.
_TERMINAL_RE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff]")
_ENV_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# A Slurm node name as an #SBATCH --nodelist line carries it (letters, digits, '.', '_', '-').
_NODE_RE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]*")


def _shown(text: str) -> str:
    return repr(text if len(text) <= 40 else text[:37] + "...")


def first_control(text: str) -> str | None:
    """The first control character of ``text`` (newline and tab included), or None."""
    match = _CONTROL_RE.search(text)
    return match.group() if match else None


def check_text(text: str, where: str) -> str:
    """``text`` unchanged, or a ``ValueError`` naming ``where`` when it holds a control character
    (newline included): names, hosts, NIC names and variables are one line of printable text."""
    bad = first_control(text)
    if bad is not None:
        raise ValueError(f"{where}: control character {bad!r} in {_shown(text)} (names are one line of text)")
    return text


def terminal_safe(text: str) -> str:
    """``text`` without control characters (escape sequences, bell, backspace, carriage return):
    what came from a file is shown as text, never acted on by the terminal. Newlines and tabs stay."""
    return _TERMINAL_RE.sub("", text)


def one_line(text: str) -> str:
    """``text`` on one line: every control character dropped (newline and tab included)."""
    return _CONTROL_RE.sub("", text)


def comment(text: str) -> str:
    """A ``#`` comment line for a shell script or Python source: ``text`` cannot leave it."""
    return "# " + one_line(text)


def shell_word(text: str, what: str = "a value") -> str:
    """``text`` as one shell word (``shlex.quote``); an ``InputError`` when it holds a control
    character (a newline in a quoted word is legal shell, but no such value is meant and the
    terminal would show it raw)."""
    bad = first_control(text)
    if bad is not None:
        raise InputError(f"{what} {_shown(text)} has a control character {bad!r}; it is not written into a shell line")
    return shlex.quote(text)


def shell_words(argv: list[str], what: str = "an argument") -> str:
    """``argv`` as one shell line, each word through ``shell_word``."""
    return " ".join(shell_word(arg, what) for arg in argv)


def env_name(name: str, what: str = "an environment variable") -> str:
    """``name`` when it is a shell variable name (``[A-Za-z_][A-Za-z0-9_]*``), else an ``InputError``."""
    if not _ENV_NAME_RE.fullmatch(name):
        raise InputError(f"{what} name {_shown(name)} is not a variable name ([A-Za-z_][A-Za-z0-9_]*)")
    return name


def env_assignment(name: str, value: str, export: bool = True) -> str:
    """``export NAME='value'`` (or ``NAME='value'`` for a command's prefix), both checked."""
    text = f"{env_name(name)}={shell_word(value, f'the value of {name}')}"
    return f"export {text}" if export else text


def slurm_node(name: str) -> str:
    """``name`` when an ``#SBATCH --nodelist=`` line can carry it, else an ``InputError``."""
    if not _NODE_RE.fullmatch(name):
        raise InputError(f"host {_shown(name)} is not a Slurm node name (letters, digits, '.', '_', '-')")
    return name


# What Slurm's AutoDetect=nvml makes of a GPU's name (lower case, spaces as "_"), kept to the
# characters a gres.conf value and a `--gres=gpu:TYPE:N` request carry unquoted.
_SLURM_TYPE_OUTSIDE_RE = re.compile(r"[^a-z0-9_.-]")
SLURM_TYPE_MAX_CHARS = 64


def slurm_gres_type(name: str | None) -> str | None:
    """A GPU's name as a gres.conf ``Type=`` word: lower case, every character outside
    ``[a-z0-9_.-]`` (spaces, ``=``, ``#``, ``:``, ``,``, quotes, controls) as ``_``, at most 64
    characters; ``gpu_`` before one that would start with a digit or ``.``/``-`` (``gpu:4090:1``
    would read as a count). None where no letter or digit is left: the line then has no ``Type=``."""
    if name is None:
        return None
    word = _SLURM_TYPE_OUTSIDE_RE.sub("_", name.strip().lower())
    word = re.sub(r"_+", "_", word).strip("_")[:SLURM_TYPE_MAX_CHARS]
    if not re.search(r"[a-z0-9]", word):
        return None
    if not word[0].isalpha() and word[0] != "_":
        word = ("gpu_" + word)[:SLURM_TYPE_MAX_CHARS]
    return word


def xml_attr(text: str, what: str = "a value") -> str:
    """``text`` as a quoted XML attribute value (``&``, ``<``, ``>`` and ``"`` escaped); an
    ``InputError`` when it holds a control character, which XML 1.0 cannot carry."""
    bad = first_control(text)
    if bad is not None:
        raise InputError(f"{what} {_shown(text)} has a control character {bad!r}; it is not written into XML")
    from xml.sax.saxutils import quoteattr

    return quoteattr(text)


def xml_comment(text: str) -> str:
    """An XML comment ``text`` cannot leave: control characters dropped, ``--`` (which would end or
    break the comment) broken up."""
    body = one_line(text).replace("&", "&amp;")
    while "--" in body:
        body = body.replace("--", "- -")
    return f"<!-- {body.rstrip('-')} -->"


def python_str(text: str) -> str:
    """``text`` as a Python string literal (``repr``): data, never code."""
    return repr(text)
