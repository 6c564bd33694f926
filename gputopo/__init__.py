"""gputopo: how your NVIDIA GPUs are wired, how fast they talk, and which ones to train on together."""

__version__ = "0.1.0"
