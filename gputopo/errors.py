"""Errors a user can cause and fix. The CLI prints them as one line and exits with the error's code.

Exit codes (docs/exit-codes.md): 0 fine; 1 a check failed; 2 usage or bad input; 3 the environment
(no NVML, TensorFlow missing or broken, output that cannot be written). Anything that is not a
``GputopoError`` is a bug in gputopo and may show a traceback.
"""

from __future__ import annotations

EXIT_OK = 0
EXIT_CHECK_FAILED = 1
EXIT_USAGE = 2
EXIT_ENVIRONMENT = 3
# What a shell reports for a process killed by SIGPIPE: the reader of our output went away
# (`gputopo scan | head`). Not an error of ours, so nothing is printed.
EXIT_PIPE_CLOSED = 141
EXIT_TERMINATED = 143  # 128 + SIGTERM, as a shell reports it


class GputopoError(Exception):
    """A problem with the user's input or machine, explained in one line."""

    exit_code = EXIT_USAGE


class InputError(GputopoError):
    """A file, option or value the user gave cannot be used."""


class NothingToRead(InputError):
    """An output's lines are in a text, but none carries what its reader takes (an NCCL log of
    bootstrap lines only). Alone, the text is refused with this reason; beside another output of the
    same paste, that part is skipped and said (a ``paste-part-empty`` reading note)."""


class OutputError(InputError):
    """Output cannot be written: the disk is full, permission is denied, the pipe was closed.

    An ``InputError`` too (the ``--save`` file the user named cannot be used), but the machine's
    fault rather than the command line's, so it exits with the environment's code."""

    exit_code = EXIT_ENVIRONMENT


class OutputClosed(OutputError):
    """The reader of standard output closed the pipe early (``| head``): stop quietly, exit 141."""

    exit_code = EXIT_PIPE_CLOSED
    quiet = True


class NvmlUnavailable(GputopoError):
    """NVML (the NVIDIA driver's management library) cannot be loaded or initialised."""

    exit_code = EXIT_ENVIRONMENT


class TensorFlowUnavailable(GputopoError):
    """The command needs TensorFlow, which is not installed (the ``tf`` extra) or cannot be imported."""

    exit_code = EXIT_ENVIRONMENT


class CheckFailed(GputopoError):
    """The command ran, but what it checked is not good enough (``scan --fail-on``, failed measurements)."""

    exit_code = EXIT_CHECK_FAILED


class TrainingFailed(GputopoError):
    """A training run (or one of its workers) failed; the message says which and why."""


class Terminated(GputopoError):
    """SIGTERM arrived while gputopo waited on a child (``gather``'s nvidia-smi): the child and its
    children were killed, nothing was written."""

    exit_code = EXIT_TERMINATED
