"""What a process sees of the host (gputopo/analysis/causes/visibility.py): NCCL without the GPUs'
sysfs path names the devices, not the environment."""

from __future__ import annotations

from gputopo.analysis.causes.doctor import doctor
from gputopo.sources.evidence.health import HealthEvidence
from gputopo.sources.evidence.pasted_health import parse_pasted


def _report(text: str, name: str = "paste.txt"):
    return doctor(HealthEvidence(source=name, pasted=[(name, parse_pasted(text))]))


def test_nccl_without_the_gpus_sysfs_path_names_the_devices_and_not_the_environment():
    """pytorch#40273: NCCL 2.4.2's `Could not find real path of /sys/class/pci_bus/...` said nothing."""
    text = "".join(f"X:4:5 [{i}] include/topo.h:27 NCCL WARN Could not find real path of "
                   f"/sys/class/pci_bus/0000:0{b}/../../0000:0{b}:00.0\n" for i, b in ((0, 2), (1, 3)))
    (finding,) = _report(text).findings
    assert (finding.severity, finding.code) == ("error", "nccl-sysfs-path")
    assert "0000:02:00.0, 0000:03:00.0" in finding.message and "the paste does not show" in finding.message
