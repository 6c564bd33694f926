"""`gputopo recommend --format gres` / `--format slurm-topology`: the files Slurm reads."""

import json

from conftest import SHARED_FIXTURES, assert_one_error_line

DGX1_TEXT = str(SHARED_FIXTURES / "topo" / "dgx1_v100_8gpu_mlx5.txt")


def gres_lines(output):
    return [line for line in output.splitlines() if line and not line.startswith("#")]


def test_gres_of_the_reference_dgx1_has_its_nv1_nv2_counts(cli):
    result = cli("recommend", "--machine", "dgx1", "--format", "gres")
    assert result.exit_code == 0, result.output
    lines = gres_lines(result.output)
    assert lines[0] == "AutoDetect=off"
    links = [line.split("Links=")[1] for line in lines[1:]]
    assert links == ["-1,1,1,2,2,0,0,0", "1,-1,2,1,0,2,0,0", "1,2,-1,2,0,0,1,0", "2,1,2,-1,0,0,0,1",
                     "2,0,0,0,-1,1,1,2", "0,2,0,0,1,-1,2,1", "0,0,1,0,1,2,-1,2", "0,0,0,1,2,1,2,-1"]
    assert "NodeName" not in lines[1]  # --machine names no host
    assert "Cores=0-19" in lines[1] and "Cores=20-39" in lines[8]


def test_gres_from_topo_m_text_says_the_minor_numbers_are_assumed(cli):
    result = cli("recommend", "--from", DGX1_TEXT, "--host", "node7", "--format", "gres")
    assert result.exit_code == 0, result.output
    said = " ".join(line[2:] for line in result.output.splitlines() if line.startswith("# "))
    assert "File=/dev/nvidiaN assumes N is the GPU's index" in said
    assert "in its index order" in said  # topo -m shows no bus ids
    assert all(line.startswith("NodeName=node7 Name=gpu ") for line in gres_lines(result.output)[1:])


def test_gres_pcie_weight(cli):
    plain = gres_lines(cli("recommend", "--machine", "pcie-8gpu", "--format", "gres").output)
    weighted = gres_lines(cli("recommend", "--machine", "pcie-8gpu", "--format", "gres", "--pcie-weight", "1").output)
    assert plain[1].endswith("Links=-1,0,0,0,0,0,0,0")
    assert weighted != plain and ",1," in weighted[1].split("Links=")[1] + ","


def test_gres_of_several_snapshots_is_a_block_per_node(cli, tmp_path):
    files = []
    for name in ("node1", "node2"):
        path = tmp_path / f"{name}.json"
        assert cli("scan", "--machine", "dgx-h100", "--host", name, "--save", str(path)).exit_code == 0
        files += ["--from", str(path)]
    result = cli("recommend", *files, "--format", "gres")
    assert result.exit_code == 0, result.output
    lines = gres_lines(result.output)
    assert [line.split()[0] for line in lines[1:]] == ["NodeName=node1"] * 8 + ["NodeName=node2"] * 8
    assert "Links=-1,18,18,18,18,18,18,18" in lines[1]


def test_slurm_topology_of_snapshots_and_a_rack(cli, tmp_path):
    snapshot = json.loads(cli("scan", "--machine", "dgx-h100", "--host", "node1", "--json").output)
    files = []
    for name in ("node1", "node2"):
        snapshot["host"] = name
        for gpu in snapshot["gpus"]:
            gpu.update(host=None, fabric_cluster_uuid="4a7d5c0e-1111-2222-3333-444455556666", fabric_clique_id=3)
        (tmp_path / f"{name}.json").write_text(json.dumps(snapshot))
        files += ["--from", str(tmp_path / f"{name}.json")]
    result = cli("recommend", *files, "--format", "slurm-topology")
    assert result.exit_code == 0, result.output
    assert gres_lines(result.output) == ["BlockName=b1 Nodes=node1,node2", "BlockSizes=2"]
    rack = cli("recommend", "--machine", "gb200-nvl72", "--format", "slurm-topology")
    assert gres_lines(rack.output)[0] == "BlockName=b1 Nodes=" + ",".join(f"tray{i:02d}" for i in range(18))


def test_refusals_are_one_line(cli):
    cases = [(["--format", "gres", "--jobs", "2"], "--jobs"), (["--gpus", "2", "--pcie-weight", "1"], "--pcie-weight"),
             ([], "--gpus is needed"), (["--format", "slurm-topology"], "host name")]
    for args, words in cases:
        assert words in assert_one_error_line(cli("recommend", "--machine", "dgx1", *args))
