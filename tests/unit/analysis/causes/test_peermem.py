"""GPUDirect RDMA (gputopo/analysis/causes/peermem.py): NCCL's ``GDR disabled`` said with what the
paste cannot show; NET/IB in use makes the check a named not-made."""

from __future__ import annotations

from gputopo.analysis.causes.doctor import doctor
from gputopo.sources.evidence.health import HealthEvidence
from gputopo.sources.evidence.pasted_health import parse_pasted


def _report(text: str, name: str = "paste.txt"):
    return doctor(HealthEvidence(source=name, pasted=[(name, parse_pasted(text))]))


def test_gdr_disabled_says_what_the_paste_cannot_show():
    (finding,) = _report("NET/IB : GPU Direct RDMA Disabled for HCA 0 'mlx5_0'").findings
    assert finding.code == "gdr-disabled" and "unknown here" in finding.message
    (finding,) = _report("NET/IB : GPU Direct RDMA Disabled for HCA 0 'mlx5_0'\nnvidia_peermem 16384 0").findings
    assert "is loaded" in finding.message


def test_net_ib_in_use_makes_the_gdr_check_a_named_not_made():
    """deit#28: an NCCL log cut after `NET/IB : Using [0]mlx4_0:1/RoCE` was refused as nothing doctor reads."""
    report = _report("h:1:1 [0] NCCL INFO NET/IB : Using [0]mlx4_0:1/RoCE ; OOB enp7s0:10.0.0.1<0>")
    assert report.findings == []
    (check,) = [c for c in report.checks if c.name == "gpudirect-rdma"]
    assert check.status == "not-made" and "GPU Direct RDMA Enabled/Disabled" in check.detail
