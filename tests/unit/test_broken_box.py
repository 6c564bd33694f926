"""Issue 32's box, end to end: 8x V100 PCIe on two sockets whose P2P is broken (ACS redirect set by
the kernel because the IOMMU is on: pairs with GPU 0 or 5 copy at ~2.4 GB/s with P2P, ~10 staged)
and whose GPU 5 sits on an x8 link (~6.3 GB/s staged to every peer). The four pastes are
tests/fixtures/doctor/constructed/ (constructed in the shapes of real captures; see its README).

A benchmark taken on a broken box must not steer the recommendation: recommend ranks the healthy
state and says so (the P2P caveat in JSON), scan names GPU 5, nothing relaxes the cross-socket
finding, and train --dry-run launches what recommend printed."""

from __future__ import annotations

import json

from conftest import OWN_FIXTURES

BOX = OWN_FIXTURES / "doctor" / "constructed"
TOPOLOGY = ["--from", str(BOX / "topo_m.txt"), "--from", str(BOX / "p2pBandwidthLatencyTest.txt")]


def test_recommend_ranks_the_healthy_state_and_says_why(cli):
    result = cli("recommend", *TOPOLOGY, "--gpus", "4", "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["groups"][0]["gpus"] == [0, 1, 2, 3]  # one NUMA node, no x8 GPU
    caveat = data["measurements_set_aside"]
    assert caveat["why"] == "p2p-slower-than-staged" and caveat["until_fixed_env"] == {"NCCL_P2P_DISABLE": "1"}
    assert [0, 1] in caveat["pairs"] and [4, 5] in caveat["pairs"] and [1, 2] not in caveat["pairs"]
    text = cli("recommend", *TOPOLOGY, "--gpus", "4").output
    assert "Ranked on the healthy state" in text and "NCCL_P2P_DISABLE=1" in text


def test_scan_names_the_slow_gpu_and_keeps_the_cross_socket_finding_whole(cli):
    data = json.loads(cli("scan", *TOPOLOGY, "--json").output)
    slow = [d for d in data["diagnostics"] if d["code"] == "gpu-slow-to-every-peer"]
    assert [d["gpus"] for d in slow] == [[5]]
    crossing = [d for d in data["diagnostics"] if d["code"] == "cross-socket"]
    assert crossing and all("placement matters only" not in d["message"] for d in crossing)


def test_train_dry_run_launches_what_recommend_printed(cli):
    best = json.loads(cli("recommend", *TOPOLOGY, "--gpus", "4", "--json").output)["groups"][0]
    result = cli("train", *TOPOLOGY, "--gpus", "4", "--dry-run", "--json")
    assert result.exit_code == 0, result.output
    (process,) = json.loads(result.output)["processes"]
    assert process["env"]["CUDA_VISIBLE_DEVICES"] == best["cuda_visible_devices"] == "0,1,2,3"
    text = " ".join(cli("train", *TOPOLOGY, "--gpus", "4", "--dry-run").output.replace("\u2502", " ").split())
    # (its slowest hop, 3-0, is NODE: beyond NCCL's default P2P level, so NCCL's SHM, fixed or not, which the
    # benchmark's staged copies measure; beside it what the ring gets today, every hop staged)
    assert "~11.4 GB/s per direction (measured)" in text
    assert "today, with NCCL_P2P_DISABLE=1 until the fix, ~9.9 GB/s per direction" in text
    assert "expected for its link type" not in text


ALL_FOUR = [*TOPOLOGY, "--from", str(BOX / "lspci_vvv.txt"), "--from", str(BOX / "dmesg.txt")]


def test_health_pastes_given_to_scan_are_judged_by_doctor_on_the_same_gpus(cli):
    """`--from` means the same in every command: the lspci and dmesg pastes beside the topology are
    judged by doctor, its findings put on the topology's GPUs (joined by the benchmark's bus ids)."""
    data = json.loads(cli("scan", *ALL_FOUR, "--json").output)
    found = {(d["code"], tuple(d["gpus"])) for d in data["diagnostics"]}
    assert ("doctor-acs-redirect", (0,)) in found and ("doctor-acs-redirect", (5,)) in found
    assert ("doctor-pcie-link-narrow", (5,)) in found
    marked = {(link["a"], link["b"]): link["health"] for link in data["links"]}
    assert "acs" in marked[(0, 1)] and "downtrained" in marked[(4, 5)] and "acs" not in marked[(1, 2)]


def test_recommend_with_every_paste_avoids_the_narrow_link_and_says_what_to_set(cli):
    """With doctor's evidence the faults are placed: GPU 5 on an x8 link, so the group leaves it out;
    ACS reroutes only the PIX pairs 0-1 and 4-5 up to the root complex (the other pairs go there
    anyway), and the IOMMU translates for every pair alike, which ranks no group below another but
    puts NCCL_P2P_DISABLE=1 in the environment until it is fixed: NUMA node 0's four GPUs."""
    data = json.loads(cli("recommend", *ALL_FOUR, "--gpus", "4", "--json").output)
    best = data["groups"][0]
    assert best["gpus"] == [0, 1, 2, 3] and 5 not in {g for group in data["groups"][:2] for g in group["gpus"]}
    assert best["env"]["NCCL_P2P_DISABLE"] == "1" and best["p2p_broken_pairs"] and "gputopo doctor" in best["p2p_caveat"]


def test_the_paste_ready_line_env_and_train_carry_the_interim_setting(cli):
    text = cli("recommend", *TOPOLOGY, "--gpus", "4").output
    assert "CUDA_VISIBLE_DEVICES=0,1,2,3 NCCL_P2P_DISABLE=1 " in text and "caveat: P2P between 0-1" in text
    assert "export NCCL_P2P_DISABLE=1" in cli("recommend", *TOPOLOGY, "--gpus", "4", "--format", "env").output
    (process,) = json.loads(cli("train", *TOPOLOGY, "--gpus", "4", "--dry-run", "--json").output)["processes"]
    assert process["env"]["NCCL_P2P_DISABLE"] == "1"


def test_health_pastes_alone_are_still_sent_to_doctor(cli):
    from conftest import assert_one_error_line

    line = assert_one_error_line(cli("scan", "--from", str(BOX / "lspci_vvv.txt")))
    assert "gputopo doctor --from" in line


def test_the_findings_say_which_explains_which(cli):
    """One cause, one complete fix: the ACS findings and P2P slower than staged are the IOMMU's doing."""
    data = json.loads(cli("scan", *ALL_FOUR, "--json").output)
    cause = {d["code"]: d.get("caused_by") for d in data["diagnostics"]}
    assert cause["doctor-acs-redirect"] == cause["p2p-slower-than-staged"] == "doctor-iommu-translating"
    assert cause["gpu-slow-to-every-peer"] == "doctor-pcie-link-narrow"  # GPU 5's x8 link
    # doctor, given the same pastes, joins them the same way
    report = json.loads(cli("doctor", *ALL_FOUR, "--json").output)
    said = {f["code"]: f.get("caused_by") for f in report["findings"]}
    assert said["p2p-slower-than-staged"] == "iommu-translating" and said["gpu-slow-to-every-peer"] == "pcie-link-narrow"
    assert cause["doctor-iommu-translating"] is None
    text = cli("scan", *ALL_FOUR).output
    assert "cause:    doctor-iommu-translating" in text


def test_report_shows_findings_worst_first_and_the_noise_assumed(cli, tmp_path):
    page = tmp_path / "box.html"
    assert cli("report", *TOPOLOGY, "--gpus", "4", "-o", str(page)).exit_code == 0
    html = page.read_text()
    findings = html[html.index('<section id="findings">'):html.index('<section id="unknown">')]
    severities = [part.split('"', 1)[0] for part in findings.split('class="sev sev-')[1:]]
    assert severities == sorted(severities, key=["error", "warning", "info"].index) and "warning" in severities
    assert "rank as equal" in html and "~5%" in html


def test_the_report_of_every_paste_marks_the_faults_where_they_are(cli, tmp_path):
    """Issue 35's 'a report from a box with ACS redirect and an x8 link marks both elements', through
    the same --from every command takes."""
    page = tmp_path / "box.html"
    assert cli("report", *ALL_FOUR, "--gpus", "4", "-o", str(page)).exit_code == 0
    html = page.read_text()
    assert 'class="fault-mark"' in html and "box box-switch fault" in html
    assert "doctor-acs-redirect" in html and "doctor-pcie-link-narrow" in html


def test_a_topology_given_through_a_pipe_is_read_once_by_its_reader(tmp_path):
    """The health split looks only at regular files: it once read `<(nvidia-smi topo -m)` to see
    whether it was a paste, and the topology reader then found the pipe empty."""
    import os
    import subprocess
    import sys

    from conftest import REPO

    script = (f'{sys.executable} -m gputopo scan --from <(cat {BOX / "topo_m.txt"}) '
              f'--from {BOX / "p2pBandwidthLatencyTest.txt"} --json')
    done = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    assert done.returncode == 0, done.stderr
    assert len(json.loads(done.stdout)["gpus"]) == 8


# --- review 4: the advice must not contradict the measurements, and ties go to what works today ---


def test_the_best_pair_measured_healthy_is_not_called_broken_by_the_iommu_finding(cli):
    """2-3 copies at 12.92 GB/s with P2P against 9.91 staged: doctor's IOMMU finding covers the host,
    but the measurement shows P2P working there, so no NCCL_P2P_DISABLE=1 (it would cost ~23%)."""
    data = json.loads(cli("recommend", *ALL_FOUR, "--gpus", "2", "--json").output)
    best = data["groups"][0]
    assert best["gpus"] == [2, 3] and "NCCL_P2P_DISABLE" not in best["env"] and not best["p2p_disable_advised"]
    assert best["p2p_broken_pairs"] == [] and best["p2p_cleared_pairs"] == [[2, 3]]
    assert best["allreduce_busbw_until_fixed_gbps"] is None
    text = cli("recommend", *ALL_FOUR, "--gpus", "2").output
    flat = " ".join(text.split())
    line = next(line for line in text.splitlines() if "CUDA_VISIBLE_DEVICES=2,3" in line)
    assert "NCCL_P2P_DISABLE" not in line and "until P2P is fixed" not in flat and "is broken" not in flat
    assert "today ~" not in flat
    assert "12.92 against 9.91" in flat


def test_four_gpus_name_only_the_pairs_measured_or_inferred_broken(cli):
    best = json.loads(cli("recommend", *ALL_FOUR, "--gpus", "4", "--json").output)["groups"][0]
    assert [2, 3] not in best["p2p_broken_pairs"] and [2, 3] in best["p2p_cleared_pairs"]
    assert [0, 1] in best["p2p_broken_pairs"]
    # NCCL would copy over the broken PIX pair 0-1 with P2P at 2.4 GB/s: host memory is faster today
    assert best["p2p_disable_advised"] and "NCCL copies over 0-1 with P2P" in best["p2p_caveat"]


def test_a_tie_of_the_healthy_state_goes_to_the_pair_that_works_today(cli):
    """0-1 ranks on its estimate once fixed, within the noise of 2-3's measured 12.9: the tie goes to
    2-3, which works today, not to 0-1 (2.37 GB/s with P2P today) for its lower numbers."""
    data = json.loads(cli("recommend", *TOPOLOGY, "--gpus", "2", "--alternatives", "3", "--json").output)
    order = [g["gpus"] for g in data["groups"]]
    assert order[0] == [2, 3] and order.index([0, 1]) > order.index([6, 7])
    zero_one = next(g for g in data["groups"] if g["gpus"] == [0, 1])
    assert all("as good as {0,1}" not in g["reason"] for g in data["groups"])
    assert "works better today" in data["groups"][order.index([0, 1]) - 1]["reason"]
    assert zero_one["p2p_disable_advised"]
