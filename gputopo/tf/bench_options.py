"""``bench-p2p``'s defaults, in a module without TensorFlow so the CLI can show them in --help.

The option parsers (sizes, sweeps, GPU lists) are ``gputopo.notation``'s.
"""

from __future__ import annotations

from gputopo.notation import MIB

DEFAULT_SIZE_BYTES = 64 * MIB  # large enough that TF's per-call dispatch is small beside the copy
DEFAULT_REPEAT = 5
DEFAULT_WARMUP = 2
DEFAULT_MIN_SAMPLE_S = 0.02  # each timed sample repeats the copy until it lasts this long
DEFAULT_STEP_TIMEOUT_S = 120.0
