"""``TopologyRequest``: the options every command shares to say where its topology comes from,
turned into one checked domain object once (pip's ``RequirementCommand`` pattern). The resolver
(``gputopo.sources.resolve``) is the only code that turns it into topologies.

``--from`` may be given several times. Files of one host (``nvidia-smi topo -m`` plus a
``p2pBandwidthLatencyTest`` run of the same box, say) are merged into one topology; snapshots that
each name a different host (``scan --host NAME --save``) are several hosts, for ``scan`` and
``recommend``'s multi-host plan.
"""

from __future__ import annotations

from dataclasses import dataclass

from gputopo.errors import InputError

MAX_HOST_NAME_CHARS = 253  # a DNS name's limit
STANDARD_INPUT = "-"


def checked_host_name(name: str, what: str = "--host") -> str:
    """``name`` if it can name a host in TF_CONFIG and on a terminal: not empty, at most 253
    characters, no whitespace or control characters; else a one-line InputError."""
    if not name or len(name) > MAX_HOST_NAME_CHARS:
        raise InputError(f"{what} must be a host name of 1 to {MAX_HOST_NAME_CHARS} characters (got {len(name)})")
    bad = next((c for c in name if c.isspace() or not c.isprintable()), None)
    if bad is not None:
        raise InputError(f"{what} {name[:40]!r} holds {bad!r}: a host name has no spaces or control characters")
    return name


@dataclass(frozen=True)
class TopologyRequest:
    """Where a command's topology comes from; checked on construction (one-line ``InputError``).

    Precedence: ``machine`` (a reference machine), else ``from_files``, else this host's NVML. A TF
    log (``tf_log``, its start-up ``tf_run``) or TensorFlow started now (``tf_now``, ``scan --tf``)
    is joined to that topology; without NVML (no driver) TensorFlow's view is the topology.
    ``host`` names the host the topology is of."""

    from_files: tuple[str, ...] = ()
    machine: str | None = None
    tf_log: str | None = None
    tf_run: int | None = None
    host: str | None = None
    tf_now: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "from_files", tuple(self.from_files or ()))
        if self.host is not None:
            checked_host_name(self.host)
        if self.machine is not None and self.from_files:
            raise InputError("give either --machine or --from, not both")
        if self.from_files.count(STANDARD_INPUT) > 1:
            raise InputError("--from - reads standard input once; give the other inputs as files")
        if STANDARD_INPUT in self.from_files and self.tf_log == STANDARD_INPUT:
            raise InputError("--from - and --tf-log - cannot both read standard input; give one of them as a file")
        if self.tf_run is not None and self.tf_log is None:
            raise InputError("--tf-run picks a start-up of --tf-log; give --tf-log too")
        if self.tf_now and self.tf_log is not None:
            raise InputError("give either --tf (run TensorFlow now) or --tf-log FILE (a saved log), not both")
        if self.tf_now and self.machine is not None:
            raise InputError("--tf runs TensorFlow on this host, and --machine is a reference machine, not this "
                             "host: give --from with this host's snapshot or topology text, or neither")

    @property
    def names_a_source(self) -> bool:
        """Whether any source was named (else the topology is this host's, through NVML)."""
        return bool(self.from_files or self.machine or self.tf_log or self.tf_now)

    def given_options(self) -> list[str]:
        """The options given, as flags, for messages such as "--tf-log is for one host"."""
        flags = {"--from": self.from_files, "--machine": self.machine, "--tf-log": self.tf_log,
                 "--tf-run": self.tf_run, "--host": self.host, "--tf": self.tf_now}
        return [flag for flag, value in flags.items() if value not in (None, False, ())]
