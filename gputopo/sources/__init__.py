"""Where a Topology comes from: NVML, the text people paste (``nvidia-smi topo -m`` and the other
kinds in ``registry``), a TF log, a saved snapshot, or a built-in reference machine.

The one door: a ``TopologyRequest`` (the shared options, checked once) goes through the resolver
(``resolve`` for one host, ``resolve_hosts`` for one topology per host); every input file is read
by content through ``registry.read_file``. Sources give the topology *as read*; findings come from
``gputopo.analysis``.
"""

from __future__ import annotations

from gputopo.sources.request import MAX_HOST_NAME_CHARS, TopologyRequest, checked_host_name
from gputopo.sources.resolve import resolve, resolve_hosts

__all__ = ["MAX_HOST_NAME_CHARS", "TopologyRequest", "checked_host_name", "resolve", "resolve_hosts"]
