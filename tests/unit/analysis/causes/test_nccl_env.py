"""NCCL variables that turn a transport off (gputopo/analysis/causes/nccl_env.py), pasted, worded as
the host's."""

from __future__ import annotations

from gputopo.analysis.causes.doctor import doctor
from gputopo.sources.evidence.health import HealthEvidence
from gputopo.sources.evidence.pasted_health import parse_pasted


def _report(text: str, name: str = "paste.txt"):
    return doctor(HealthEvidence(source=name, pasted=[(name, parse_pasted(text))]))


def _codes(text):
    return {(f.severity, f.code) for f in _report(text).findings}


def test_pasted_variables_are_worded_as_the_hosts():
    codes = _codes("NCCL_P2P_DISABLE=1\nNCCL_P2P_LEVEL=LOC\nNCCL_SHM_DISABLE=1\nNCCL_IB_DISABLE=1")
    assert codes == {("warning", "env-nccl-p2p-disable"), ("warning", "env-nccl-p2p-level"),
                     ("info", "env-nccl-shm-disable"), ("info", "env-nccl-ib-disable")}
    assert _codes("export NCCL_IB_DISABLE=0\nexport NCCL_DEBUG=INFO") == set()
