"""`gputopo nccl-topo`: NCCL's topology XML for one host, to stdout or a file."""

from conftest import assert_one_error_line


def test_writes_a_file_scan_reads_back(cli, tmp_path):
    path = tmp_path / "dgx1.xml"
    result = cli("nccl-topo", "--machine", "dgx1", "-o", str(path))
    assert result.exit_code == 0, result.output
    text = path.read_text()
    assert text.startswith('<system version="1">') and text.count("<gpu ") == 8
    scan = cli("scan", "--from", str(path), "--json")
    assert scan.exit_code == 0, scan.output
    assert '"type": "NV2"' in scan.output


def test_stdout_and_one_tray_of_a_rack(cli):
    result = cli("nccl-topo", "--machine", "gb200-nvl72", "--node", "tray05")
    assert result.exit_code == 0, result.output
    assert result.output.count("<gpu ") == 4 and '<gpu dev="0"' in result.output
    assert "--node" in assert_one_error_line(cli("nccl-topo", "--machine", "gb200-nvl72"))


def test_gpus_without_bus_ids_are_said_to_get_made_up_ones(cli, tmp_path):
    """Newcomer review: from `topo -m` text every GPU's bus id is made up, and only an XML comment said so."""
    from conftest import OWN_FIXTURES

    result = cli("nccl-topo", "--from", str(OWN_FIXTURES / "doctor/constructed/topo_m.txt"), "-o", str(tmp_path / "t.xml"))
    assert result.exit_code == 0 and "no PCI bus id in the source" in result.output
    assert "no PCI bus id" not in cli("nccl-topo", "--machine", "dgx1", "-o", str(tmp_path / "d.xml")).output
