"""Every output format that something else interprets, over topologies and plans whose strings are
arbitrary text (hypothesis): the text is data in every one of them, or the output is refused in one
line (``InputError``). Nothing from a snapshot or plan becomes code.

- ``recommend --format env`` / the plan's env blocks, run by bash in a scratch folder, define exactly
  the expected variables and run nothing (a canary file never appears);
- ``recommend --format python`` parses to exactly the expected statements;
- both sbatch scripts pass ``bash -n`` and, run with ``srun`` stubbed, run only the expected srun;
- the HTML report and the SVG parse with no script, event handler or ``javascript:`` URL from input.

The topologies are built in memory, past the snapshot door (which refuses control characters in
names): these tests check the quoting itself, for strings that come from NVML or sysfs too.
"""

from __future__ import annotations

import ast
import dataclasses
import json
import os
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gputopo.errors import InputError
from gputopo.sources.reference import load_reference

BASH = shutil.which("bash")
pytestmark = pytest.mark.skipif(BASH is None, reason="bash is not installed")

# What an attacker would put into a name: each tries to leave its quoting and touch the canary.
INJECTIONS = [
    "\ntouch canary\n", "$(touch canary)", "`touch canary`", "'; touch canary; '", "\"; touch canary; \"",
    "\r\ntouch canary #", "\\\ntouch canary", "\x1b]0;x\x07", "\u2028touch canary", "${IFS}touch${IFS}canary",
    "'''\nimport os; os.system('touch canary')\n'''", "\"\"\"\nopen('canary','w')\n#", "\\", "\x00",
    "</text><script>alert(1)</script>", "\" onload=\"alert(1)", "javascript:alert(1)", "]]><script>x</script>",
    "[/x][link=https://evil]", "%(touch canary)", "\\'", "{x}", "--",
]
TEXT = st.one_of(
    st.text(max_size=30),
    st.sampled_from(INJECTIONS),
    st.tuples(st.text(max_size=8), st.sampled_from(INJECTIONS), st.text(max_size=8)).map("".join),
)
NODE = st.from_regex(r"[a-z][a-z0-9-]{0,10}", fullmatch=True)
# One line of text (what passes the door): the injections that need no newline, often, so most
# examples reach the shell run rather than a refusal.
ONE_LINE = st.one_of(
    st.text(alphabet=st.characters(blacklist_categories=("Cc", "Cs", "Zl", "Zp")), max_size=30),
    st.sampled_from([i for i in INJECTIONS if not any(c in i for c in "\n\r\x00\x1b\u2028")]),
)
WORD = st.integers(0, 3).flatmap(lambda k: TEXT if k == 0 else ONE_LINE)  # 3 in 4: one line
HOST = st.integers(0, 3).flatmap(lambda k: TEXT if k == 0 else NODE)  # 3 in 4: a node name
SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def _hostile_topology(host: str, gpu_name: str, nic_name: str, netdev: str, second_host: str | None = None):
    """The 4-GPU two-socket reference with arbitrary strings in its names (``second_host``: GPUs 2, 3
    on another host, so groups may span hosts)."""
    topo = load_reference("two-socket-4gpu")
    gpus = [dataclasses.replace(g, name=gpu_name, host=second_host if second_host is not None and g.index >= 2 else host)
            for g in topo.gpus]
    nics = [dataclasses.replace(n, name=f"{nic_name}{k}", rdma_device=f"{nic_name}{k}", netdev=netdev)
            for k, n in enumerate(topo.nics)]
    return dataclasses.replace(topo, host=host, label=gpu_name, gpus=gpus, nics=nics)


def _bash_env(tmp_path: Path, script: str) -> tuple[dict[str, str], list[str]]:
    """The variables ``eval`` of ``script`` adds to an empty environment, and the files it leaves."""
    scratch = tmp_path / "scratch"
    shutil.rmtree(scratch, ignore_errors=True)
    scratch.mkdir()
    (scratch / "out").write_text(script)
    probe = 'eval "$(cat out)" >/dev/null 2>&1; rm -f out; env -0'
    baseline = subprocess.run([BASH, "--norc", "--noprofile", "-c", "rm -f out; env -0"], cwd=scratch,
                              env={"PATH": os.defpath}, capture_output=True, timeout=30)
    (scratch / "out").write_text(script)
    run = subprocess.run([BASH, "--norc", "--noprofile", "-c", probe], cwd=scratch, env={"PATH": os.defpath},
                         capture_output=True, timeout=30)

    def parse(raw: bytes) -> dict[str, str]:
        return dict(item.split("=", 1) for item in raw.decode("utf-8", "surrogateescape").split("\0") if "=" in item)

    before, after = parse(baseline.stdout), parse(run.stdout)
    added = {k: v for k, v in after.items() if before.get(k) != v and k != "_"}
    return added, sorted(p.name for p in scratch.iterdir())


@SETTINGS
@given(host=WORD, gpu_name=TEXT, nic=WORD, netdev=WORD, jobs=st.sampled_from([1, 2]))
def test_env_output_defines_exactly_its_variables_and_runs_nothing(tmp_path, host, gpu_name, nic, netdev, jobs):
    from gputopo.analysis.recommend import recommend
    from gputopo.views.recommend import format_env

    rec = recommend(_hostile_topology(host, gpu_name, nic, netdev), 2, jobs=jobs)
    try:
        script = format_env(rec)
    except InputError:
        return  # refused in one line: nothing was written
    best = rec.jobs[0] if rec.jobs_requested > 1 else rec.best
    expected = {"CUDA_DEVICE_ORDER": "PCI_BUS_ID", "CUDA_VISIBLE_DEVICES": best.cuda_visible_devices}
    if best.numactl:
        expected["GPUTOPO_NUMACTL"] = best.numactl
    if jobs > 1:
        expected.update({f"CUDA_VISIBLE_DEVICES_JOB{g.rank}": g.cuda_visible_devices for g in rec.jobs})
    added, files = _bash_env(tmp_path, script)
    assert added == expected, script
    assert files == [], script  # no canary, nothing else
    assert all(line.startswith(("# ", "export ")) for line in script.splitlines()), script


@SETTINGS
@given(host=TEXT, other=TEXT, gpu_name=TEXT, nic=TEXT, netdev=TEXT, spans=st.booleans())
def test_python_snippet_is_exactly_the_expected_statements(host, other, gpu_name, nic, netdev, spans):
    from gputopo.analysis.recommend import recommend
    from gputopo.views.recommend import format_python

    topology = _hostile_topology(host, gpu_name, nic, netdev, second_host=other if spans and other != host else None)
    rec = recommend(topology, 4 if spans else 2)
    tree = ast.parse(format_python(rec))
    shapes = [ast.dump(node) for node in tree.body]
    kinds = [type(node).__name__ for node in tree.body]
    assert kinds[0] == "Import" and kinds[-1] == "Assign" and kinds[-2] == "Import", shapes
    assert set(kinds) <= {"Import", "Assign"}, shapes
    environ = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Subscript):
            target = node.targets[0]
            assert ast.unparse(target.value) == "os.environ", shapes
            assert isinstance(target.slice, ast.Constant) and isinstance(node.value, ast.Constant), shapes
            environ[target.slice.value] = node.value.value
    assert environ["CUDA_DEVICE_ORDER"] == "PCI_BUS_ID"
    if rec.best.same_host:
        assert environ == {"CUDA_DEVICE_ORDER": "PCI_BUS_ID", "CUDA_VISIBLE_DEVICES": rec.best.cuda_visible_devices}
    strategy = tree.body[-1]
    assert [ast.unparse(t) for t in strategy.targets] == ["strategy"]
    names = {n.id for n in ast.walk(strategy.value) if isinstance(n, ast.Name)}
    assert names <= {"tf"}, ast.dump(strategy)


def _plan(hosts: list[str], nic: str, netdev: str):
    from gputopo.analysis.recommend.hosts import plan_hosts

    return plan_hosts([_hostile_topology(h, "GPU", nic, netdev) for h in hosts], 2 * len(hosts))


@SETTINGS
@given(first=WORD, second=WORD, nic=WORD, netdev=WORD)
def test_plan_env_blocks_define_exactly_the_plan_variables(tmp_path, first, second, nic, netdev):
    from gputopo.views.cluster_plan import format_plan_env

    if first == second:
        return
    plan = _plan([first, second], nic, netdev)
    try:
        script = format_plan_env(plan)
    except InputError:
        return
    expected: dict[str, str] = {}
    for host in plan.hosts:  # each block sets the same names; the last one stays
        expected.update(host.env)
        expected["TF_CONFIG"] = json.dumps(host.tf_config)
        if host.numactl:
            expected["GPUTOPO_NUMACTL"] = " ".join(host.numactl)
    added, files = _bash_env(tmp_path, script)
    assert added == expected, script
    assert files == [], script


def _stubbed_run(tmp_path: Path, script: str, *args: str) -> list[list[str]]:
    """``script`` checked by ``bash -n`` and run with a fake ``srun`` that records its argv; the
    srun calls made, and no other file left in the scratch folder."""
    scratch, bin_dir = tmp_path / "job", tmp_path / "bin"
    for folder in (scratch, bin_dir):
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir()
    log = tmp_path / "srun.log"
    log.write_bytes(b"")
    srun = bin_dir / "srun"
    srun.write_text(f'#!{BASH}\nfor a in "$@"; do printf "%s\\0" "$a"; done >> {log}\nprintf "\\n\\0" >> {log}\n')
    srun.chmod(0o755)
    (scratch / "job.sbatch").write_text(script)
    assert subprocess.run([BASH, "-n", "job.sbatch"], cwd=scratch, timeout=30).returncode == 0, script
    subprocess.run([BASH, "job.sbatch", *args], cwd=scratch, env={"PATH": f"{bin_dir}:{os.defpath}"},
                   capture_output=True, timeout=30)
    assert sorted(p.name for p in scratch.iterdir()) == ["job.sbatch"], script
    calls = log.read_bytes().decode("utf-8", "surrogateescape").split("\n\0")[:-1]
    return [call.split("\0")[:-1] for call in calls]


def _script_lines_are_known(script: str) -> None:
    for line in script.splitlines():
        assert line in ("#!/bin/bash", "", "set -euo pipefail") or line.startswith(("#SBATCH --", "# ", "srun ")), script


@SETTINGS
@given(first=HOST, second=HOST, nic=TEXT, netdev=TEXT, plan_file=WORD)
def test_recommend_sbatch_script_runs_only_its_srun(tmp_path, first, second, nic, netdev, plan_file):
    from gputopo.views.cluster_plan import format_plan_slurm

    if first == second:
        return
    try:
        script = format_plan_slurm(_plan([first, second], nic, netdev), plan_file or None)
    except InputError:
        return
    _script_lines_are_known(script)
    calls = _stubbed_run(tmp_path, script, "--epochs", "$(touch canary)")
    assert calls == [["--kill-on-bad-exit=1", "gputopo", "train", "--launcher", "slurm", "--plan",
                      plan_file or "plan.json", "--epochs", "$(touch canary)"]]


@SETTINGS
@given(first=HOST, second=HOST, plan_name=WORD, checkpoint_dir=WORD)
def test_train_dry_run_sbatch_script_runs_only_its_srun(tmp_path, first, second, plan_name, checkpoint_dir):
    from gputopo.train.config import TrainConfig
    from gputopo.model.cluster_plan import ClusterPlan, HostPlan
    from gputopo.train.launch.slurm import sbatch_script

    entries = [HostPlan(host=h, task_index=k, gpus=[0, 1], cuda_visible_devices="0,1", numactl=[], nics=[], env={},
                         tf_config={"cluster": {"worker": []}}) for k, h in enumerate([first, second])]
    plan = ClusterPlan(path=plan_name or "p", gpus=4, gpus_per_host=2, hosts=entries)
    config = TrainConfig(checkpoint_dir=checkpoint_dir or None)
    try:
        script = sbatch_script(plan, config, 2222)
    except InputError:
        return
    _script_lines_are_known(script)
    assert "#SBATCH --gpus-per-node=2" in script.splitlines()
    (call,) = _stubbed_run(tmp_path, script)
    assert call[:9] == ["--kill-on-bad-exit=1", "gputopo", "train", "--launcher", "slurm", "--plan", plan.path,
                        "--port", "2222"]
    if checkpoint_dir:
        assert call[call.index("--checkpoint-dir") + 1] == checkpoint_dir


class _Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.scripts: list[str] = []
        self.types: list[str] = []
        self.in_script = False
        self.attrs: list[tuple[str, str]] = []

    def handle_starttag(self, tag, attrs):
        self.attrs += [(name, value or "") for name, value in attrs]
        if tag == "script":
            self.types.append(dict(attrs).get("type") or "")
            self.scripts.append("")
            self.in_script = True

    def handle_endtag(self, tag):
        if tag == "script":
            self.in_script = False

    def handle_data(self, data):
        if self.in_script:
            self.scripts[-1] += data


def _parsed(page: str) -> _Tags:
    tags = _Tags()
    tags.feed(page)
    tags.close()
    return tags


@SETTINGS
@given(host=TEXT, gpu_name=TEXT, nic=TEXT, netdev=TEXT)
def test_report_and_svg_carry_no_script_or_handler_from_input(host, gpu_name, nic, netdev):
    import xml.etree.ElementTree as ET

    from gputopo.analysis import with_findings
    from gputopo.views.report import render_report
    from gputopo.views.svg import render_svg

    from gputopo.analysis.recommend import recommend

    topology = with_findings(_hostile_topology(host, gpu_name, nic, netdev))
    benign = with_findings(_hostile_topology("h", "GPU", "mlx", "ib"))
    plain = _parsed(render_report(benign, recommend(benign, 2)))
    page = _parsed(render_report(topology, recommend(topology, 2)))
    assert page.types == plain.types  # the same script elements: the snapshot's data block and the page's code
    for kind, text, own in zip(page.types, page.scripts, plain.scripts):
        if kind == "application/json":
            assert json.loads(text)["gpus"][0]["name"] == gpu_name  # data, read back whole
        else:
            assert text == own  # the page's own code only
    for name, value in page.attrs:
        assert not name.lower().startswith("on"), (name, value)
        assert "javascript:" not in value.lower().replace(" ", ""), (name, value)
    svg = render_svg(topology)
    root = ET.fromstring(svg.encode())  # well-formed XML
    for element in root.iter():
        assert not element.tag.lower().endswith("script"), element.tag
        for name, value in element.attrib.items():
            assert not name.rsplit("}", 1)[-1].lower().startswith("on"), (name, value)
            assert "javascript:" not in value.lower(), (name, value)


def test_bidi_overrides_are_control_characters_too():
    """Review 2: U+202E reversed how a name printed (a "Trojan Source" look-alike)."""
    import pytest

    from gputopo.quoting import check_text, one_line, terminal_safe

    name = "gpu\u202e0cod.exe\u2066x\u2069"
    assert terminal_safe(name) == one_line(name) == "gpu0cod.exex"
    with pytest.raises(ValueError, match="control character"):
        check_text(name, "gpus[0].name")


def test_bidi_marks_are_control_characters_too():
    """Unicode's Bidi_Control set is the overrides and isolates and three marks: RLM (U+200F), LRM
    (U+200E) and ALM (U+061C) are strong invisible letters that reorder the neutral text around them
    (a bus id's ':' and '.', a GPU list's ','), in a name as on a terminal that applies the bidi
    algorithm."""
    import pytest

    from gputopo.quoting import check_text, one_line, terminal_safe

    for mark in ("\u200f", "\u200e", "\u061c"):
        name = f"0000:{mark}41:00.0"
        assert terminal_safe(name) == one_line(name) == "0000:41:00.0"
        with pytest.raises(ValueError, match="control character"):
            check_text(name, "gpus[0].pci_bus_id")


@pytest.mark.parametrize(("name", "word"), [
    ("Tesla V100-SXM2-16GB", "tesla_v100-sxm2-16gb"),  # as Slurm's AutoDetect=nvml writes it
    ("NVIDIA H100 80GB HBM3", "nvidia_h100_80gb_hbm3"),
    ("A100 #1 Links=0\nName=x", "a100_1_links_0_name_x"),
    ("4090", "gpu_4090"),  # `--gres=gpu:4090:1` would read 4090 as a count
    ("--- ", None),
    ("", None),
    (None, None),
])
def test_slurm_gres_type(name, word):
    from gputopo.quoting import slurm_gres_type

    assert slurm_gres_type(name) == word


def test_xml_attr_and_comment():
    import xml.etree.ElementTree as ET

    from gputopo.errors import InputError
    from gputopo.quoting import xml_attr, xml_comment

    value = 'a"b<c>&d'
    assert ET.fromstring(f"<x v={xml_attr(value)}/>").get("v") == value
    with pytest.raises(InputError, match="control character"):
        xml_attr("a\nb")
    note = xml_comment("x --> <y/> --- \n z-")
    assert note.startswith("<!-- ") and note.endswith(" -->") and "--" not in note[4:-3]
    assert list(ET.fromstring(f"<r>{note}</r>")) == []


def test_lone_surrogates_are_no_text_for_any_target():
    """Security review: a file name read with surrogateescape carries the 8-bit CSI 0x9b as '\\udc9b',
    which a terminal acts on when it is written back as a byte; a snapshot's '\\ud800' broke every
    writer (UnicodeEncodeError, exit 1). Names refuse them; terminal text drops them."""
    import pytest

    from gputopo.quoting import check_text, one_line, terminal_safe

    for bad in ("mlx\udc9b2J", "V100\ud800x"):
        with pytest.raises(ValueError):
            check_text(bad, "name")
        assert "\udc9b" not in terminal_safe(bad) and "\ud800" not in one_line(bad)


def test_a_snapshot_with_a_surrogate_in_free_text_still_writes_a_report(cli, tmp_path):
    import json

    from gputopo.sources.reference import load_reference

    data = load_reference("dgx1").to_dict()
    data["diagnostics"] = [{"severity": "warning", "code": "x", "message": "bad \ud800 text", "gpus": [0]}]
    snapshot = tmp_path / "s.json"
    snapshot.write_text(json.dumps(data))
    assert cli("report", "--from", str(snapshot), "-o", str(tmp_path / "r.html")).exit_code == 0
    assert "bad ? text" in (tmp_path / "r.html").read_text() or "bad  text" in (tmp_path / "r.html").read_text()
