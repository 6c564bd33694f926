"""``Cluster``: several hosts' topologies side by side (one snapshot per host), with the findings
about the hosts together, and its JSON under ``gputopo.cluster/1``."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from gputopo.model.from_json import build, shown
from gputopo.model.parts import Finding
from gputopo.model.topology import Topology

CLUSTER_SCHEMA = "gputopo.cluster/1"


@dataclass
class Cluster:
    """The hosts of a multi-host run, each its own ``Topology`` naming its ``host``; ``diagnostics``
    are the findings about the hosts together (mismatches), each host keeps its own."""

    hosts: list[Topology] = field(default_factory=list)
    diagnostics: list[Finding] = field(default_factory=list)

    @property
    def host_names(self) -> list[str]:
        return [topology.host or f"host {k}" for k, topology in enumerate(self.hosts)]

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": CLUSTER_SCHEMA,
            "hosts": [topology.to_dict() for topology in self.hosts],
            "findings": [dataclasses.asdict(finding) for finding in self.diagnostics],
            "diagnostics": [dataclasses.asdict(finding) for finding in self.diagnostics],  # deprecated alias
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Cluster:
        """Build a Cluster from ``to_dict`` output; raises ``ValueError`` on a wrong shape."""
        if not isinstance(data, dict):
            raise ValueError("a cluster must be a JSON object")
        if data.get("schema") != CLUSTER_SCHEMA:
            raise ValueError(f"schema: unsupported cluster schema {shown(data.get('schema'))} (expected {CLUSTER_SCHEMA!r})")
        hosts = data.get("hosts")
        if not isinstance(hosts, list):
            raise ValueError(f"hosts: must be a list, got {shown(hosts)}")
        topologies = []
        for k, host in enumerate(hosts):
            try:
                topologies.append(Topology.from_dict(host))
            except ValueError as exc:
                raise ValueError(f"hosts[{k}]: {exc}") from None
        findings = data.get("diagnostics", data.get("findings", []))
        if not isinstance(findings, list):
            raise ValueError(f"diagnostics: must be a list, got {shown(findings)}")
        return cls(hosts=topologies, diagnostics=[build(Finding, f, f"diagnostics[{k}]") for k, f in enumerate(findings)])
