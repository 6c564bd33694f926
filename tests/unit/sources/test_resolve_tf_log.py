"""The shared source resolver: which source wins, and how a TF log is joined."""

import pytest
from conftest import SHARED_FIXTURES

import gputopo.sources.host.nvml as nvml_source
from gputopo.errors import InputError, NvmlUnavailable
from gputopo.analysis import with_findings
from gputopo.sources import TopologyRequest, resolve
from gputopo.sources.reference import load_reference

TF0_LOG = str(SHARED_FIXTURES / "tf_logs" / "tf0_gpu_init_cannot_enable_peer_4gpu.log")


def test_tf_log_alone_without_nvml_becomes_the_topology(monkeypatch):
    def no_driver():
        raise NvmlUnavailable("no driver")

    monkeypatch.setattr(nvml_source, "probe", no_driver)
    topo = with_findings(resolve(TopologyRequest(tf_log=TF0_LOG)))
    assert topo.source == "tf-log"
    assert topo.tf is not None and len(topo.tf.devices) == 4
    assert "tf-log-alone" in {f.code for f in topo.diagnostics}


def test_tf_log_with_nvml_is_joined_to_this_host(monkeypatch):
    host = load_reference("two-socket-4gpu")
    host.source, host.is_reference = "nvml", False
    monkeypatch.setattr(nvml_source, "probe", lambda: host)
    topo = with_findings(resolve(TopologyRequest(tf_log=TF0_LOG)))
    assert topo.source == "nvml" and topo.link(0, 2).type == "SYS"
    assert topo.tf is not None
    codes = {f.code for f in topo.diagnostics}
    assert "tf-log-alone" not in codes
    assert any(code.startswith("tf-") for code in codes)


def test_machine_and_from_together_is_a_user_error():
    with pytest.raises(InputError, match="either --machine or --from"):
        resolve(TopologyRequest(from_files=("x",), machine="dgx1"))


def test_from_and_tf_log_cannot_both_be_standard_input(cli):
    """The TF log was read first and took the pasted matrix with it: a misleading 'no GPU lines'."""
    from conftest import assert_one_error_line

    with pytest.raises(InputError, match="cannot both read standard input"):
        resolve(TopologyRequest(from_files=("-",), tf_log="-"))
    result = cli("scan", "--from", "-", "--tf-log", "-", input="\tGPU0\tGPU1\nGPU0\t X \tPIX\nGPU1\tPIX\t X \n")
    assert "standard input" in assert_one_error_line(result)


def test_tf_log_given_now_replaces_the_one_saved_in_a_snapshot(tmp_path):
    from conftest import OWN_FIXTURES

    from gputopo.sources.snapshot import save_snapshot

    saved = with_findings(resolve(TopologyRequest(machine="two-socket-4gpu", tf_log=TF0_LOG)))
    assert "tf-join-assumed" in {f.code for f in saved.diagnostics}
    path = tmp_path / "snap.json"
    save_snapshot(saved, path)
    new_log = str(OWN_FIXTURES / "tf_logs" / "tf15_edge_matrix_visible_order_differs.log")
    topo = with_findings(resolve(TopologyRequest(from_files=(str(path),), tf_log=new_log)))
    assert topo.tf is not None and topo.tf.source == new_log
    codes = [f.code for f in topo.diagnostics]
    assert "tf-join-assumed" not in codes  # said of the old log, which had no bus ids
    assert "tf-order-differs" in codes and codes.count("tf-peer-groups") == 1
    assert "cross-socket" in codes  # the topology's own findings stay


def test_shared_fixtures_are_present():
    """Parametrised fixture tests would silently collect nothing without tests/fixtures/shared."""
    from conftest import TF_LOG_FIXTURES, TOPO_FIXTURES

    assert len(TOPO_FIXTURES) >= 3, f"no nvidia-smi captures under {SHARED_FIXTURES / 'topo'}"
    assert len(TF_LOG_FIXTURES) >= 3, f"no TensorFlow logs under {SHARED_FIXTURES / 'tf_logs'}"


def test_a_tf_log_given_now_also_replaces_the_old_logs_findings_merged_as_notes(tmp_path, monkeypatch):
    """A paste with reading notes, then a snapshot saved with a TF log: the snapshot's findings are
    carried as worded notes (sources.merge); those about the old log go all the same."""
    from conftest import OWN_FIXTURES

    from gputopo.sources.snapshot import save_snapshot

    def no_driver():
        raise NvmlUnavailable("no driver")

    monkeypatch.setattr(nvml_source, "probe", no_driver)
    snapshot = tmp_path / "tf.json"
    save_snapshot(with_findings(resolve(TopologyRequest(tf_log=TF0_LOG))), snapshot)
    paste = tmp_path / "topo.txt"
    paste.write_text("# \tGPU0\tGPU1\tGPU2\tGPU3\n# GPU0\t X \tPIX\tSYS\tSYS\n# GPU1\tPIX\t X \tSYS\tSYS\n"
                     "# GPU2\tSYS\tSYS\t X \tPIX\n# GPU3\tSYS\tSYS\tPIX\t X \n")
    merged = resolve(TopologyRequest(from_files=(str(paste), str(snapshot))))
    assert merged.reading_notes[0].code == "repaired-paste"
    assert {n.code for n in merged.reading_notes if "worded" in n.facts} >= {"tf-log-alone", "tf-peer-groups"}
    new_log = str(OWN_FIXTURES / "tf_logs" / "tf15_edge_matrix_visible_order_differs.log")
    topo = resolve(TopologyRequest(from_files=(str(paste), str(snapshot)), tf_log=new_log))
    kept = [n.code for n in topo.reading_notes if n.code.startswith("tf-")]
    assert set(kept) == {"tf-log-alone"} and topo.tf.source == new_log
