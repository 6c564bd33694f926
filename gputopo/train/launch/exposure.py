"""Which unauthenticated gRPC servers a training run opens, and keeping local ones off the network.

- ``--strategy mirrored``: no server.
- A local cluster (``--local-workers N``; ``--strategy parameter-server``, whose servers run in one
  process): its processes run in one private network namespace (``gputopo.train.launch.netns``) with
  only loopback. Where the kernel does not allow that, the run is refused unless the user passes
  ``--allow-exposed-ports``; then a warning names the ports.
- A cross-host worker (``--workers h1:p1,... --task-index I``): it must listen on the network; a
  warning names its port and says to firewall it (docs/security.md).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Callable, Sequence

from gputopo.train.workers import LOOPBACK, free_local_ports, parse_address
from gputopo.train.launch.netns import PrivateNetwork, PrivateNetworkUnavailable
from gputopo.train.launch.plan import ProcessSpec

ALLOW_OPTION = "--allow-exposed-ports"
_WHO_CAN = "anyone who can reach them can run code in the trainer (TensorFlow's gRPC servers have no authentication)"


@dataclass
class NetworkGuard:
    """How a run's children are started as far as the network goes, and what to warn about."""

    processes: list[ProcessSpec]  # possibly with the parameter servers' addresses filled in
    network: PrivateNetwork | None = None  # the private namespace every child runs in
    warning: str | None = None  # said once, before the run

    @property
    def isolated(self) -> bool:
        return self.network is not None

    def wrap(self, argv: Sequence[str]) -> list[str]:
        return self.network.wrap(argv) if self.network is not None else list(argv)

    def close(self) -> None:
        if self.network is not None:
            self.network.close()


def _local_cluster(processes: Sequence[ProcessSpec]) -> bool:
    config = processes[0].config
    if config.strategy == "parameter-server":
        return True
    return config.strategy == "multi-worker" and len(processes) == len(config.workers) > 0 and all(
        parse_address(a)[0] == LOOPBACK for a in config.workers
    )


def _with_ps_addresses(processes: list[ProcessSpec]) -> list[ProcessSpec]:
    """A parameter-server run left open: its ports are picked here, so the warning can name them."""
    spec = processes[0]
    count = (spec.config.ps or 1) + (spec.config.ps_workers or 2)
    addresses = [f"{LOOPBACK}:{port}" for port in free_local_ports(count)]
    return [dataclasses.replace(spec, config=dataclasses.replace(spec.config, server_addresses=addresses))]


def _ports(addresses: Sequence[str]) -> str:
    return ", ".join(str(parse_address(a)[1]) for a in addresses)


def guard_network(
    processes: Sequence[ProcessSpec],
    allow_exposed_ports: bool = False,
    open_network: Callable[[], PrivateNetwork] | None = None,
) -> NetworkGuard:
    """Decide before any child starts: isolate a local cluster, or refuse, or warn (see the module)."""
    processes = list(processes)
    config = processes[0].config
    if config.strategy == "mirrored":
        return NetworkGuard(processes)
    if not _local_cluster(processes):
        own = config.workers[config.task_index]
        return NetworkGuard(
            processes,
            warning=f"warning: this worker's TensorFlow server listens on port {_ports([own])} on every interface of "
            f"this host for the whole run; {_WHO_CAN}. Allow only the other workers' addresses "
            f"({', '.join(a for a in config.workers if a != own) or 'none'}) through your firewall; see docs/security.md",
        )
    try:
        return NetworkGuard(processes, network=(open_network or PrivateNetwork.open)())
    except PrivateNetworkUnavailable as exc:
        if not allow_exposed_ports:
            raise PrivateNetworkUnavailable(
                f"cannot keep the local cluster's TensorFlow servers off the network: {exc}; they would listen on "
                f"every interface without authentication. Pass {ALLOW_OPTION} to run anyway (see docs/security.md)"
            ) from None
    if config.strategy == "parameter-server":
        processes = _with_ps_addresses(processes)
        addresses = processes[0].config.server_addresses
    else:
        addresses = config.workers
    return NetworkGuard(
        processes,
        warning=f"warning: {ALLOW_OPTION}: this run's TensorFlow servers listen on ports {_ports(addresses)} on every "
        f"interface of this host while it trains; {_WHO_CAN}",
    )
