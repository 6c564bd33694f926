"""Reading Slurm's view of a node's GPUs: ``slurmd -G`` lines and ``scontrol show node`` Gres=."""

from gputopo.sources.evidence.slurm_gres_text import read, sniff

# As Slurm 22.05's slurmd -G printed it in tests/system/test_slurm_gres.py (File= there in the test's
# folder; here as on a real node).
SLURMD_G = """\
slurmd-localhost: Gres Name=gpu Type=tesla_v100-sxm2-16gb Count=1 Index=0 ID=7696487 File=/dev/nvidia0 Cores=0 CoreCnt=2 Links=-1,1,1,2,2,0,0,0
slurmd-localhost: Gres Name=gpu Type=tesla_v100-sxm2-16gb Count=1 Index=1 ID=7696487 File=/dev/nvidia1 Cores=0 CoreCnt=2 Links=1,-1,2,1,0,2,0,0
"""
# As its scontrol show node printed it there (lines cut after Gres=).
SCONTROL = """\
NodeName=localhost Arch=x86_64 CoresPerSocket=1
   CPUAlloc=0 CPUEfctv=2 CPUTot=2 CPULoad=2.91
   AvailableFeatures=(null)
   Gres=gpu:tesla_v100-sxm2-16gb:8(S:0)
"""


def test_slurmd_g_lines():
    assert sniff(SLURMD_G)
    gpus = read(SLURMD_G).gpus
    assert [(g.node, g.index, g.type, g.minor, g.cores, g.links) for g in gpus] == [
        ("localhost", 0, "tesla_v100-sxm2-16gb", 0, [0], [-1, 1, 1, 2, 2, 0, 0, 0]),
        ("localhost", 1, "tesla_v100-sxm2-16gb", 1, [0], [1, -1, 2, 1, 0, 2, 0, 0]),
    ]


def test_a_line_without_type_cores_or_links():
    (gpu,) = read("slurmd: Gres Name=gpu Type=(null) Count=1 Index=3 ID=1 File=/dev/nvidia3\n").gpus
    assert (gpu.node, gpu.type, gpu.minor, gpu.cores, gpu.links) == (None, None, 3, None, None)


def test_scontrol_show_node():
    assert sniff(SCONTROL)
    (node,) = read(SCONTROL).nodes
    assert (node.node, node.entries, node.line) == ("localhost", [("tesla_v100-sxm2-16gb", 8)], 4)
    (plain,) = read("NodeName=n1 Arch=x86_64\n   Gres=gpu:4\n").nodes
    assert plain.entries == [(None, 4)]


def test_other_text_and_damaged_values():
    assert not sniff("Gres=gpu:8\n") and not sniff("lspci output\n")
    damaged = read("slurmd-n1: Gres Name=gpu Index=x File=/dev/nvidia0\n"
                   "slurmd-n1: Gres Name=gpu Index=1 Cores=zz Links=1,a\n").gpus
    assert [(g.index, g.cores, g.links) for g in damaged] == [(1, None, None)]


def test_unicode_digits_are_not_gpu_numbers():
    """Security review: `Index=²` raised in int() (exit 1) and `Index=٣` read as GPU 3."""
    from gputopo.sources.evidence.slurm_gres_text import read

    for index in ("\u00b2", "\u0663"):
        text = f"slurmd-box1: Gres Name=gpu Type=a100 Count=1 Index={index} File=/dev/nvidia0 Links=-1,0\n"
        assert read(text).gpus == []
    assert [gpu.index for gpu in read(text.replace("Index=\u0663", "Index=3")).gpus] == [3]
