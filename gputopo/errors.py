"""Errors a user can cause and fix. The CLI prints them as one line and exits with code 2.

Anything that is not a ``GputopoError`` is a bug in gputopo and may show a traceback.
"""

from __future__ import annotations


class GputopoError(Exception):
    """A problem with the user's input or machine, explained in one line."""

    exit_code = 2


class InputError(GputopoError):
    """A file, option or value the user gave cannot be used."""


class NvmlUnavailable(GputopoError):
    """NVML (the NVIDIA driver's management library) cannot be loaded or initialised."""


class TensorFlowUnavailable(GputopoError):
    """The command needs TensorFlow, which is not installed (the ``tf`` extra)."""


class TrainingFailed(GputopoError):
    """A training run (or one of its workers) failed; the message says which and why."""
