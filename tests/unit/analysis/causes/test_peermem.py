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


def test_an_empty_lsmod_grep_is_the_peer_module_missing():
    """nccl#988 as posted (prose, the two empty greps, an NCCL log using IBext): nvidia-peermem-missing
    naming the grep and NCCL's IB use; with NCCL's GDR-disabled lines beside it, that finding names the
    grep as the cause; a row of the module anywhere in the paste outweighs an empty grep."""
    from pathlib import Path

    report = _report(Path("tests/fixtures/corpus/issue_bodies/nccl988_prose_lsmod_grep_peermem_both_empty_then_nccl"
                          "_ib_sharp_log_cut.txt").read_text())
    (finding,) = report.findings
    assert (finding.severity, finding.code) == ("warning", "nvidia-peermem-missing")
    assert "line 6" in finding.message and "NET/IB here (line 17)" in finding.message
    assert [c.status for c in report.checks if c.name == "gpudirect-rdma"] == ["problem"]
    both = _report("```\n$ lsmod | grep peermem\n```\nh:1:2 [0] NCCL INFO NET/IB : GPU Direct RDMA Disabled for HCA 0 'mlx5_0'")
    assert sorted(f.code for f in both.findings) == ["gdr-disabled", "nvidia-peermem-missing"]
    assert "shows the peer-memory module not loaded" in next(f for f in both.findings if f.code == "gdr-disabled").message
    assert _report("$ lsmod | grep nv_peer_mem\n$ lsmod | grep peermem\nnvidia_peermem 16384 0\n").findings == []
