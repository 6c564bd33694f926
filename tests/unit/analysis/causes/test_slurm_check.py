"""Slurm's GPUs (slurmd -G, scontrol) against the wiring: each difference named, through doctor."""

from linktable import cube_mesh_8, nvswitch

from gputopo.analysis.causes.doctor import doctor
from gputopo.analysis.causes.slurm_check import slurm_findings
from gputopo.analysis.slurm.slurm_gres import gres_nodes
from gputopo.sources.evidence.health import HealthEvidence
from gputopo.sources.evidence.slurm_gres_text import read
from gputopo.views.slurm_files import format_gres

CPUS = ["0-19,40-59"] * 4 + ["20-39,60-79"] * 4


def slurmd_g(text):
    """gputopo's own gres.conf lines as slurmd -G prints them back."""
    lines = [line.split(" ", 2)[2] for line in text.splitlines() if line.startswith("NodeName=")]
    return "".join(f"slurmd-n1: Gres Name=gpu Count=1 Index={i} ID=1 {line}\n" for i, line in enumerate(lines))


def expected(topology):
    (node,) = gres_nodes([topology])
    return node


def codes(findings):
    return [f.code for f in findings]


def test_slurm_as_written_has_nothing_to_say():
    topology = cube_mesh_8(host="n1", cpus=CPUS)
    assert slurm_findings("g", read(slurmd_g(format_gres(gres_nodes([topology])))), expected(topology)) == []


def test_a_missing_gpu_a_wrong_link_and_a_gpu_on_the_wrong_socket():
    topology = cube_mesh_8(host="n1", cpus=CPUS)
    text = slurmd_g(format_gres(gres_nodes([topology])))
    lines = text.splitlines()[:7]  # GPU 7 dropped
    lines[3] = lines[3].replace("Links=2,1,2,-1,0,0,0,1", "Links=2,1,2,-1,0,0,0,0")
    lines[4] = lines[4].replace("Cores=20-39", "Cores=0-19")
    findings = slurm_findings("slurmd-G.txt", read("\n".join(lines)), expected(topology))
    assert codes(findings) == ["slurm-gpu-missing", "slurm-links-differ", "slurm-cores-wrong-socket"]
    assert "7 of the 8 GPUs" in findings[0].message and findings[0].gpus == [7]
    assert findings[1].gpus == [3, 7] and findings[2].gpus == [4]


def test_nvswitch_peers_seen_as_zero_is_info():
    topology = nvswitch(4, "NV18", host="n1")
    zero = "".join(f"slurmd-n1: Gres Name=gpu Index={i} File=/dev/nvidia{i} Links="
                   + ",".join("-1" if j == i else "0" for j in range(4)) + "\n" for i in range(4))
    (finding,) = slurm_findings("g", read(zero), expected(topology))
    assert (finding.severity, finding.code, finding.gpus) == ("info", "slurm-nvswitch-links-zero", [0, 1, 2, 3])


def test_scontrol_counting_fewer_gpus():
    topology = cube_mesh_8(host="n1")
    seen = read("NodeName=n1 Arch=x86_64\n   Gres=gpu:v100:6(S:0-1)\n")
    (finding,) = slurm_findings("scontrol.txt", seen, expected(topology))
    assert finding.code == "slurm-gpu-missing" and "6 of the 8" in finding.message


def test_doctor_says_the_check_was_not_made_without_the_wiring_and_makes_it_with():
    seen = read("slurmd-n1: Gres Name=gpu Index=0 File=/dev/nvidia0 Links=-1,0\n")
    alone = doctor(HealthEvidence(source="x", slurm_gres=[("g.txt", seen)]))
    assert [c.status for c in alone.checks if "Slurm" in c.name] == ["not-made"]
    wired = doctor(HealthEvidence(source="x", slurm_gres=[("g.txt", seen)],
                                  read_as_topology=[("snap", cube_mesh_8(host="n1"))]))
    assert [c.status for c in wired.checks if "Slurm" in c.name] == ["ok"]
    assert "slurm-gpu-missing" in codes(wired.findings)
