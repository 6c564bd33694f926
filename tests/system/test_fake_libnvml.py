"""The NVML probe through NVIDIA's REAL binding (nvidia-ml-py) on a fake libnvidia-ml.so.1.

tests/fake_libnvml/fake_nvml.c is built with the system's C compiler (one call, as the Makefile's
``fake-nvml`` target does) and loaded by the real ``pynvml`` in a child process (LD_LIBRARY_PATH +
GPUTOPO_FAKE_NVML_SNAPSHOT). Every answer must equal what the Python fake (tests/fake_nvml.py) gives
for the same machine and the same injected failure: the two fakes agree, and the real ctypes path
(symbol versions, struct layouts, error classes, bytes/str) is exercised. The library must export
every NVML function the code calls, in the version the installed binding resolves.
"""

from __future__ import annotations

import ast
import inspect
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pynvml
import pytest
from conftest import REPO, corpus_known_gaps
from fake_nvml import FakeNvml
from linktable import nvswitch

from gputopo.analysis.notes.reading_notes import note_findings
from gputopo.errors import EXIT_ENVIRONMENT, NvmlUnavailable
from gputopo.model import Gpu, Topology
from gputopo.notation import check_utc_time
from gputopo.sources.host.nvml import probe
from gputopo.sources.reference import MACHINES, load_reference
from gputopo.sources.registry import read_file

SOURCE = REPO / "tests" / "fake_libnvml" / "fake_nvml.c"
WORKER = REPO / "tests" / "fake_libnvml" / "probe_worker.py"
CORPUS = sorted((REPO / "tests" / "fixtures" / "corpus" / "topo").glob("*.txt"))
NOTE_PREFIX = "fake libnvidia-ml: "  # the library's own note on stderr (snapshot missing or unreadable)
# socket comes from this host's /sys in a CLI run (the fake library cannot change what Python reads there).
# Live state (memory in use, utilisation, processes) is not in a reference machine: compared where injected.
GPU_FIELDS = [f.name for f in __import__("dataclasses").fields(Gpu)
              if f.name not in ("host", "socket", "memory_used_bytes", "utilization_percent", "processes")]
LINK_FIELDS = ["type", "nvlink_count", "nvswitch", "pcie_path", "p2p_read", "p2p_write", "p2p_atomics", "p2p_nvlink"]


def _cflags() -> list[str]:
    """The Makefile's flags, so `make fake-nvml` and the tests build the same library."""
    match = re.search(r"^FAKE_NVML_CFLAGS := (.+)$", (REPO / "Makefile").read_text(), re.M)
    assert match, "Makefile lost FAKE_NVML_CFLAGS"
    return match.group(1).split()


def build_library(directory: Path, omit: tuple[str, ...] = ()) -> Path:
    """One compiler call; ``omit`` hides symbols (an older driver) with a linker version script."""
    compiler = shutil.which("gcc") or shutil.which("cc")
    if compiler is None:
        pytest.skip("no C compiler (gcc/cc) here to build the fake libnvidia-ml.so.1")
    directory.mkdir(parents=True, exist_ok=True)
    command = [compiler, *_cflags(), "-o", str(directory / "libnvidia-ml.so.1"), str(SOURCE)]
    if omit:
        script = directory / "omit.map"
        script.write_text("{ global: *; local: " + " ".join(f"{name};" for name in omit) + " };\n")
        command.insert(1, f"-Wl,--version-script={script}")
    result = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "warning" not in result.stderr, result.stderr
    return directory


@pytest.fixture(scope="session")
def libnvml(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_library(tmp_path_factory.mktemp("fake-nvml"))


def _env(lib_dir: Path, snapshot: Path | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "GPUTOPO_FAKE_NVML_SNAPSHOT"}
    env["LD_LIBRARY_PATH"] = os.pathsep.join(filter(None, [str(lib_dir), os.environ.get("LD_LIBRARY_PATH")]))
    env["PYTHONPATH"] = str(REPO)
    if snapshot is not None:
        env["GPUTOPO_FAKE_NVML_SNAPSHOT"] = str(snapshot)
    return env


def run_real(lib_dir: Path, jobs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Probe each job's snapshot through the real binding, in one child process."""
    result = subprocess.run(
        [sys.executable, str(WORKER)], input=json.dumps(jobs), env=_env(lib_dir), cwd=REPO,
        capture_output=True, text=True, timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout)


def _host_of(topo: Topology) -> str | None:
    """NVML sees one host: for a multi-host rack (GB200 NVL72) probe the second tray."""
    hosts = sorted({g.host for g in topo.gpus if g.host})
    return hosts[1] if len(hosts) > 1 else None


def _code(error: type[Exception]) -> int:
    return error().value  # the NVML return code behind a pynvml error class


class Case:
    """One machine and one set of injected failures, set up for both fakes."""

    def __init__(self, tmp: Path, name: str, topology: Topology, **knobs: Any) -> None:
        self.name = name
        host = _host_of(topology)
        self.fake = FakeNvml(topology, host=host, **knobs)
        injection: dict[str, Any] = {"host": host} if host else {}
        if knobs.get("unsupported"):
            injection["errors"] = {
                (key if isinstance(key, str) else f"{key[0]}@{key[1]}"): _code(error)
                for key, error in knobs["unsupported"].items()
            }
        for knob in ("lost_after", "inactive_links", "gpu_numa_ids"):
            if knobs.get(knob):
                injection[knob] = {str(gpu): value for gpu, value in knobs[knob].items()}
        if knobs.get("ancestor_overrides"):
            injection["ancestor_overrides"] = {f"{a}-{b}": level for (a, b), level in knobs["ancestor_overrides"].items()}
        if knobs.get("init_error"):
            injection["init_error"] = _code(knobs["init_error"])
        if knobs.get("driver_version"):
            injection["driver_version"] = knobs["driver_version"]
        per_gpu = _per_gpu_injection(knobs)
        if per_gpu:
            injection["gpus"] = per_gpu
        data = topology.to_dict()
        if injection:
            data["fake_nvml"] = injection
        self.snapshot = tmp / f"{len(list(tmp.iterdir()))}-{name}.json"
        self.snapshot.write_text(json.dumps(data))

    def job(self) -> dict[str, Any]:
        return {"snapshot": str(self.snapshot), "sysfs_root": self.fake.sysfs_root}

    def expected(self) -> dict[str, Any]:
        try:
            return {"topology": probe(self.fake).to_dict()}
        except NvmlUnavailable as exc:
            return {"error": str(exc)}


def _per_gpu_injection(knobs: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """FakeNvml's per-GPU knobs (fabric, live state) as the injection section's ``gpus``."""
    gpus: dict[str, dict[str, Any]] = {}
    for gpu, (state, status, mask) in (knobs.get("fabric") or {}).items():
        gpus.setdefault(str(gpu), {})["fabric"] = {"state": state, "status": status, "health_mask": mask}
    for gpu, percent in (knobs.get("utilization") or {}).items():
        gpus.setdefault(str(gpu), {})["utilization"] = {"gpu": percent, "memory": 0}
    for gpu, procs in (knobs.get("processes") or {}).items():
        gpus.setdefault(str(gpu), {})["processes"] = [
            {"pid": pid, **({"name": name} if name is not None else {}),
             **({"used_memory_bytes": used} if used is not None else {})} for pid, name, used in procs]
    for knob, key in (("memory_used", "memory_used_bytes"), ("memory_reserved", "memory_reserved_bytes"),
                      ("performance_state", "performance_state")):
        for gpu, value in (knobs.get(knob) or {}).items():
            gpus.setdefault(str(gpu), {})[key] = value
    return gpus


def assert_fakes_agree(lib_dir: Path, cases: list[Case]) -> list[dict[str, Any]]:
    got = run_real(lib_dir, [case.job() for case in cases])
    for case, answer in zip(cases, got):
        assert _timeless(answer) == _timeless(case.expected()), case.name
    return got


def _timeless(answer: dict[str, Any]) -> dict[str, Any]:
    """The answer without its capture time (each probe reads the clock, maybe a second apart); the
    time itself must be a UTC ISO time."""
    topology = answer.get("topology")
    if not isinstance(topology, dict) or topology.get("captured_at") is None:
        return answer
    check_utc_time(topology["captured_at"], "captured_at")
    return {**answer, "topology": {**topology, "captured_at": "(read)"}}


# --- exports: every NVML function the code calls, in the version the binding resolves ------------


def nvml_functions_called() -> set[str]:
    """pynvml functions named in gputopo's code: query names (string constants) and attribute calls."""
    names: set[str] = set()
    for path in (REPO / "gputopo").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                names.add(node.value)
            elif isinstance(node, ast.Attribute):
                names.add(node.attr)
    return {n for n in names if re.fullmatch(r"nvml[A-Z]\w*", n) and inspect.isfunction(getattr(pynvml, n, None))}


def resolved_symbols(name: str) -> set[str]:
    """The C symbols ``pynvml.<name>`` looks up (following its calls: nvmlInit -> nvmlInitWithFlags)."""
    source = inspect.getsource(getattr(pynvml, name))
    symbols = set(re.findall(r'_nvmlGetFunctionPointer\("(\w+)"\)', source))
    if not symbols:
        body = source.split(":", 1)[1]
        for callee in set(re.findall(r"\b(nvml[A-Z]\w*)\(", body)) - {name}:
            if inspect.isfunction(getattr(pynvml, callee, None)):
                symbols |= resolved_symbols(callee)
    return symbols


def exported(lib_dir: Path) -> set[str]:
    result = subprocess.run(
        ["nm", "-D", "--defined-only", str(lib_dir / "libnvidia-ml.so.1")], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    return {line.split()[-1] for line in result.stdout.splitlines() if line.split()}


def test_library_exports_every_function_the_code_calls_and_docs_list_them(libnvml: Path) -> None:
    called = nvml_functions_called()
    assert {"nvmlInit", "nvmlDeviceGetP2PStatus", "nvmlDeviceGetPciInfo", "nvmlDeviceGetNvLinkRemotePciInfo"} <= called
    symbols = exported(libnvml)
    docs = (REPO / "docs" / "nvml.md").read_text()
    for name in sorted(called):
        wanted = resolved_symbols(name)
        assert wanted, name
        assert wanted <= symbols, f"{name} resolves to {sorted(wanted - symbols)}, which the fake library does not export"
        row = next((line for line in docs.splitlines() if line.startswith(f"| `{name}`")), None)
        assert row is not None, f"docs/nvml.md does not list {name}"
        assert all(f"`{symbol}`" in row for symbol in wanted), (name, wanted, row)
    # Versions the binding resolves, not the plain names (the wrong ones give other struct layouts).
    assert resolved_symbols("nvmlDeviceGetPciInfo") == {"nvmlDeviceGetPciInfo_v3"}
    assert resolved_symbols("nvmlInit") == {"nvmlInitWithFlags"}
    # What doctor's checks will call is there too.
    for symbol in ("nvmlDeviceGetGpuFabricInfoV", "nvmlDeviceGetNvLinkErrorCounter", "nvmlDeviceGetUtilizationRates",
                   "nvmlDeviceGetPerformanceState",
                   "nvmlDeviceGetComputeRunningProcesses_v3", "nvmlSystemGetProcessName", "nvmlErrorString"):
        assert symbol in symbols


# --- both fakes give the same Topology ------------------------------------------------------------


def test_both_fakes_agree_on_every_reference_machine_and_the_corpus(libnvml: Path, tmp_path: Path) -> None:
    cases = [Case(tmp_path, machine, load_reference(machine)) for machine in MACHINES]
    gaps = corpus_known_gaps()  # captures the reader cannot read right yet (some it refuses)
    cases += [Case(tmp_path, path.stem, read_file(str(path))) for path in CORPUS
              if "p2p" not in path.stem and path.name not in gaps]
    assert len(cases) > 40
    got = assert_fakes_agree(libnvml, cases)
    for case, answer in zip(cases[: len(MACHINES)], got):
        assert answer["topology"]["reading_notes"] == [], case.name  # a reference machine answers everything
        assert answer["topology"]["diagnostics"] == [], case.name
    dgx1 = Topology.from_dict(got[0]["topology"])
    assert dgx1.driver_version == "550.54.15" and dgx1.cuda_driver_version == "12.4"
    assert dgx1.link(0, 3).type == "NV2" and dgx1.gpu(0).pci_bus_id == "0000:06:00.0"


def test_scan_json_round_trips_each_reference_machine(libnvml: Path, tmp_path: Path) -> None:
    runs = {}
    for machine in MACHINES:
        original = load_reference(machine)
        data = original.to_dict()
        host = _host_of(original)
        if host:
            data["fake_nvml"] = {"host": host}
        snapshot = tmp_path / f"{machine}.json"
        snapshot.write_text(json.dumps(data))
        runs[machine] = subprocess.Popen(
            [sys.executable, "-m", "gputopo", "scan", "--json"], env=_env(libnvml, snapshot), cwd=REPO,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
    for machine, run in runs.items():
        stdout, stderr = run.communicate(timeout=120)
        assert run.returncode == 0 and stderr == "", (machine, stderr)
        scanned = Topology.from_dict(json.loads(stdout))
        original = load_reference(machine)
        host = _host_of(original)
        mine = [g for g in original.gpus if host is None or g.host == host]
        assert scanned.source == "nvml" and len(scanned.gpus) == len(mine)
        for local, want in enumerate(mine):
            got = scanned.gpu(local)
            for name in GPU_FIELDS:
                assert getattr(got, name) == (local if name == "index" else getattr(want, name)), (machine, local, name)
        for link in scanned.links:
            want = original.link(mine[link.a].index, mine[link.b].index)
            for name in LINK_FIELDS:
                assert getattr(link, name) == getattr(want, name), (machine, link.a, link.b, name)


# --- injected failures: the same findings and errors through the real binding ---------------------


def test_injected_failures_give_the_same_topology_as_the_python_fake(libnvml: Path, tmp_path: Path) -> None:
    h100, a100 = load_reference("dgx-h100"), load_reference("dgx-a100")
    clean = FakeNvml(h100)
    probe(clean)
    own_calls = clean._gpus[5].calls - 5 * 7  # GPU 5's own queries, before its 35 pair queries
    not_supported, unknown = pynvml.NVMLError_NotSupported, pynvml.NVMLError_Unknown
    cases = [
        Case(tmp_path, "lost-own", h100, lost_after={2: 3}),
        Case(tmp_path, "lost-pair", h100, lost_after={5: own_calls}),
        Case(tmp_path, "cpu-affinity", h100, unsupported={"nvmlDeviceGetCpuAffinity": not_supported}),
        Case(tmp_path, "no-permission", load_reference("pcie-8gpu"),
             unsupported={("nvmlDeviceGetMaxPcieLinkWidth", 3): pynvml.NVMLError_NoPermission}),
        Case(tmp_path, "p2p", load_reference("two-socket-4gpu"), unsupported={("nvmlDeviceGetP2PStatus", 3): unknown}),
        Case(tmp_path, "handle", load_reference("pcie-8gpu"),
             unsupported={("nvmlDeviceGetHandleByIndex", 1): pynvml.NVMLError_NoPermission}),
        Case(tmp_path, "links-down", h100, inactive_links={5: 2}),
        Case(tmp_path, "board", load_reference("two-socket-4gpu"), ancestor_overrides={(0, 1): pynvml.NVML_TOPOLOGY_INTERNAL}),
        Case(tmp_path, "numa-id", a100, unsupported={"nvmlDeviceGetMemoryAffinity": not_supported},
             gpu_numa_ids={i: 10 + i for i in range(8)}),
        Case(tmp_path, "nvlink-state", load_reference("dgx1"), unsupported={("nvmlDeviceGetNvLinkState", 0): unknown}),
        Case(tmp_path, "count", h100, unsupported={"nvmlDeviceGetCount": unknown}),
        Case(tmp_path, "pstates", load_reference("pcie-8gpu"), performance_state={0: 0, 1: 8, 2: 32, 3: 2},
             unsupported={("nvmlDeviceGetPerformanceState", 3): pynvml.NVMLError_NoPermission}),
    ]
    cases += [Case(tmp_path, error.__name__, h100, init_error=error) for error in (
        pynvml.NVMLError_DriverNotLoaded, pynvml.NVMLError_NoPermission, pynvml.NVMLError_LibRmVersionMismatch,
        pynvml.NVMLError_GpuIsLost, pynvml.NVMLError_Unknown)]
    got = assert_fakes_agree(libnvml, cases)
    by_name = {case.name: answer for case, answer in zip(cases, got)}
    lost = Topology.from_dict(by_name["lost-own"]["topology"])
    assert [f.code for f in note_findings(lost.reading_notes)] == ["gpu-lost"] and lost.gpu(2).pci_bus_id == "0000:3a:00.0"
    assert [f.code for f in note_findings(Topology.from_dict(by_name["lost-pair"]["topology"]).reading_notes)] == ["gpu-lost"]
    assert "could not count the GPUs (unknown error)" in by_name["count"]["error"]
    assert "kernel driver is not loaded" in by_name["NVMLError_DriverNotLoaded"]["error"]
    assert "versions differ" in by_name["NVMLError_LibRmVersionMismatch"]["error"]
    assert "NVML could not start (Unknown Error)" in by_name["NVMLError_Unknown"]["error"]
    states = [g["performance_state"] for g in by_name["pstates"]["topology"]["gpus"]]
    assert states == [0, 8, None, None, None, None, None, None]  # 32 unknown; 3 denied; the rest NOT_SUPPORTED


def test_a_symbol_the_driver_lacks_is_function_not_found(tmp_path: Path) -> None:
    older = build_library(tmp_path / "older", omit=("nvmlDeviceGetNvLinkRemoteDeviceType", "nvmlDeviceGetNumaNodeId"))
    assert "nvmlDeviceGetNumaNodeId" not in exported(older) and "nvmlDeviceGetNvLinkState" in exported(older)
    no_affinity = pynvml.NVMLError_NotSupported
    cases = [
        Case(tmp_path, "a100", load_reference("dgx-a100"), missing={"nvmlDeviceGetNumaNodeId"}, unsupported={
            "nvmlDeviceGetNvLinkRemoteDeviceType": pynvml.NVMLError_FunctionNotFound,
            "nvmlDeviceGetMemoryAffinity": no_affinity}),
        Case(tmp_path, "dgx1", load_reference("dgx1"),
             unsupported={"nvmlDeviceGetNvLinkRemoteDeviceType": pynvml.NVMLError_FunctionNotFound}),
    ]
    # The library's own copy must not answer the omitted call: only the missing symbol may say so.
    for case in cases:
        data = json.loads(case.snapshot.read_text())
        data["fake_nvml"]["errors"].pop("nvmlDeviceGetNvLinkRemoteDeviceType")
        case.snapshot.write_text(json.dumps(data))
    a100, dgx1 = (Topology.from_dict(answer["topology"]) for answer in assert_fakes_agree(older, cases))
    findings = note_findings(a100.reading_notes)  # what the probe noted, as analysis words it
    finding = next(f for f in findings if f.code == "nvml-nvlink-remote-unavailable")
    assert a100.link(0, 1).type == "PXB" and "not in this driver" in finding.message
    assert next(f for f in findings if f.code == "nvml-numa-unavailable").gpus == list(range(8))
    assert dgx1.link(0, 3).type == "NV2"


# --- the CLI: exit codes and one-line errors ---------------------------------------------------------


def _scan(lib_dir: Path, snapshot: Path | None) -> subprocess.CompletedProcess[str]:
    env = _env(lib_dir, snapshot)
    env["COLUMNS"] = "200"  # findings on one line each, whatever terminal runs the tests
    return subprocess.run(
        [sys.executable, "-m", "gputopo", "scan"], env=env, cwd=REPO,
        capture_output=True, text=True, timeout=120,
    )


def test_cli_init_failures_exit_3_with_one_line(libnvml: Path, tmp_path: Path) -> None:
    no_permission = Case(tmp_path, "perm", load_reference("dgx1"), init_error=pynvml.NVMLError_NoPermission)
    not_json = tmp_path / "not.json"
    not_json.write_text('{"schema": "gputopo.topology/1", "gpus": [' + "[" * 5000)
    for snapshot, words, note in (
        (no_permission.snapshot, "no permission", None),
        (None, "kernel driver is not loaded", "GPUTOPO_FAKE_NVML_SNAPSHOT is not set"),
        (tmp_path / "absent.json", "kernel driver is not loaded", "cannot open"),
        (not_json, "NVML could not start (Unknown Error)", "not gputopo.topology/1 JSON"),
    ):
        result = _scan(libnvml, snapshot)
        assert result.returncode == EXIT_ENVIRONMENT, result.stderr
        notes = [line for line in result.stderr.splitlines() if line.startswith(NOTE_PREFIX)]
        lines = [line for line in result.stderr.splitlines() if not line.startswith(NOTE_PREFIX)]
        assert len(lines) == 1 and lines[0].startswith("gputopo: error: ") and words in lines[0], result.stderr
        assert (notes == []) if note is None else (len(notes) == 1 and note in notes[0]), result.stderr
        assert result.stdout == "" and "Traceback" not in result.stderr


def test_cli_scan_shows_a_lost_gpu_as_a_finding(libnvml: Path, tmp_path: Path) -> None:
    case = Case(tmp_path, "lost", load_reference("dgx-h100"), lost_after={2: 3})
    result = _scan(libnvml, case.snapshot)
    assert result.returncode == 0, result.stderr
    assert "fell off the bus" in result.stdout and "nvidia-smi -r -i 2" in result.stdout


# --- what doctor's checks read: fabric, utilization, processes, NVLink errors ----------------------

_DOCTOR_CALLS = """
import json, pynvml
pynvml.nvmlInit()
out = {}
def ask(name, fn):
    try:
        out[name] = fn()
    except pynvml.NVMLError as exc:
        out[name] = type(exc).__name__
h0, h1 = pynvml.nvmlDeviceGetHandleByIndex(0), pynvml.nvmlDeviceGetHandleByIndex(1)
def fabric_v3(h):
    info = pynvml.c_nvmlGpuFabricInfo_v3_t()
    pynvml.nvmlDeviceGetGpuFabricInfoV(h, pynvml.byref(info))
    return [info.state, info.status, info.cliqueId, info.healthMask, info.healthSummary, bytes(info.clusterUuid).hex()]
def fabric_v2(h):
    info = pynvml.c_nvmlGpuFabricInfoV_t()
    pynvml.nvmlDeviceGetGpuFabricInfoV(h, pynvml.byref(info))
    return [info.state, info.healthMask]
def fabric_v1(h):
    info = pynvml.c_nvmlGpuFabricInfo_t()
    pynvml.nvmlDeviceGetGpuFabricInfo(h, pynvml.byref(info))
    return [info.state, info.cliqueId]
ask("fabric_v3", lambda: fabric_v3(h0)); ask("fabric_v2", lambda: fabric_v2(h0)); ask("fabric_v1", lambda: fabric_v1(h0))
ask("fabric_none", lambda: fabric_v3(h1)); ask("fabric_v1_denied", lambda: fabric_v1(h1))
ask("util", lambda: [pynvml.nvmlDeviceGetUtilizationRates(h0).gpu, pynvml.nvmlDeviceGetUtilizationRates(h0).memory])
ask("util_none", lambda: pynvml.nvmlDeviceGetUtilizationRates(h1).gpu)
ask("pstate", lambda: pynvml.nvmlDeviceGetPerformanceState(h0))
ask("pstate_none", lambda: pynvml.nvmlDeviceGetPerformanceState(h1))
ask("procs", lambda: [[p.pid, p.usedGpuMemory] for p in pynvml.nvmlDeviceGetComputeRunningProcesses(h0)])
ask("procs_none", lambda: pynvml.nvmlDeviceGetComputeRunningProcesses(h1))
ask("name", lambda: pynvml.nvmlSystemGetProcessName(4242))
ask("name_none", lambda: pynvml.nvmlSystemGetProcessName(1))
ask("errors", lambda: [pynvml.nvmlDeviceGetNvLinkErrorCounter(h0, 1, c) for c in range(5)])
ask("errors_none", lambda: pynvml.nvmlDeviceGetNvLinkErrorCounter(h0, 0, 0))
ask("errors_link_down", lambda: pynvml.nvmlDeviceGetNvLinkErrorCounter(h0, 17, 0))
ask("errors_bad_counter", lambda: pynvml.nvmlDeviceGetNvLinkErrorCounter(h0, 1, 5))
ask("memory", lambda: [pynvml.nvmlDeviceGetMemoryInfo(h0).used, pynvml.nvmlDeviceGetMemoryInfo(h0).free])
ask("memory_v2", lambda: [getattr(pynvml.nvmlDeviceGetMemoryInfo(h0, pynvml.nvmlMemory_v2), f)
                          for f in ("used", "reserved", "free")])
pynvml.nvmlShutdown()
print(json.dumps(out))
"""


def test_doctor_answers_come_from_the_injection_section_else_as_the_driver_answers(libnvml: Path, tmp_path: Path) -> None:
    data = load_reference("dgx-h100").to_dict()
    data["fake_nvml"] = {"inactive_links": {"0": 1}, "errors": {"nvmlDeviceGetGpuFabricInfo@1": "NO_PERMISSION"},
                         "gpus": {"0": {
        "fabric": {"state": "IN_PROGRESS", "status": "NOT_READY", "clique_id": 7, "health_mask": 0x21,
                   "health_summary": 2, "cluster_uuid": "01234567-89ab-cdef-0123-456789abcdef"},
        "utilization": {"gpu": 97, "memory": 40}, "performance_state": 8,
        "processes": [{"pid": 4242, "used_memory_bytes": 1 << 30, "name": "python train.py"}, {"pid": 77}],
        "nvlink_errors": {"1": {"0": 0, "1": 3, "2": 0, "3": 12, "4": 0}, "17": {"0": 9}},  # link 17 is down
        "memory_used_bytes": 1 << 30, "memory_reserved_bytes": 616 << 20,
    }}}
    snapshot = tmp_path / "doctor.json"
    snapshot.write_text(json.dumps(data))
    result = subprocess.run([sys.executable, "-c", _DOCTOR_CALLS], env=_env(libnvml, snapshot), capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    got = json.loads(result.stdout)
    total = 85899345920
    assert got["fabric_v3"] == [pynvml.NVML_GPU_FABRIC_STATE_IN_PROGRESS, 27, 7, 0x21, 2, "0123456789abcdef0123456789abcdef"]
    assert got["fabric_v2"] == [2, 0x21] and got["fabric_v1"] == [2, 7]
    # GPU 1 (no fabric given): an H100 on NVSwitches, registered as Fabric Manager leaves it.
    assert got["fabric_none"] == [pynvml.NVML_GPU_FABRIC_STATE_COMPLETED, 0, 0, 0, 0, "00" * 16]
    assert got["util_none"] == got["procs_none"] == "NVMLError_NotSupported"
    assert got["errors_none"] == 0  # an active link, no count given: nothing counted yet
    assert got["util"] == [97, 40]
    assert got["pstate"] == 8 and got["pstate_none"] == "NVMLError_NotSupported"
    assert got["procs"] == [[4242, 1 << 30], [77, None]]  # no figure: NVML_VALUE_NOT_AVAILABLE -> None
    assert got["name"] == "python train.py" and got["name_none"] == "NVMLError_NotFound"
    assert got["errors"] == [0, 3, 0, 12, 0]
    assert got["errors_link_down"] == "NVMLError_NotSupported" and got["errors_bad_counter"] == "NVMLError_InvalidArgument"
    assert got["fabric_v1_denied"] == "NVMLError_NoPermission"  # injected for the plain call on GPU 1 only
    reserve = 616 << 20  # version 1 counts the driver's reserve as used, as a real H200 did
    assert got["memory"] == [(1 << 30) + reserve, total - (1 << 30) - reserve]
    assert got["memory_v2"] == [1 << 30, reserve, total - (1 << 30) - reserve]


def test_the_probe_reads_memory_used_without_the_drivers_reserve(libnvml: Path, tmp_path: Path) -> None:
    """Through the real binding: version 2 of the memory query, as nvidia-smi shows "Used" (a real
    idle H200 answered 616 MiB to version 1 and 0 to version 2; tests/hardware/README.md)."""
    data = load_reference("dgx-h100").to_dict()
    data["fake_nvml"] = {"gpus": {"0": {"memory_used_bytes": 0, "memory_reserved_bytes": 616 << 20},
                                  "1": {"memory_used_bytes": 3 << 30, "memory_reserved_bytes": 616 << 20}}}
    snapshot = tmp_path / "reserve.json"
    snapshot.write_text(json.dumps(data))
    [got] = run_real(libnvml, [{"snapshot": str(snapshot), "sysfs_root": None}])
    gpus = got["topology"]["gpus"]
    assert [g["memory_used_bytes"] for g in gpus[:2]] == [0, 3 << 30]


def test_64_gpus_on_bus_ids_c0_to_ff_through_nvswitch(libnvml: Path, tmp_path: Path) -> None:
    """Both fakes put the NVSwitch chips at bus ids c0..ff that no GPU uses; 64 GPUs there leave
    none free (a division by zero in each: C's SIGFPE, Python's ZeroDivisionError). The chips then
    go where no GPU is, and both fakes still agree."""
    bus_ids = [f"0000:{bus:02x}:00.0" for bus in range(0xC0, 0x100)]
    machine = nvswitch(64, "NV18", "4.0", gpu={"pci_bus_id": bus_ids})
    [got] = assert_fakes_agree(libnvml, [Case(tmp_path, "nvswitch-64-c0-ff", machine)])
    probed = Topology.from_dict(got["topology"])
    assert [g.pci_bus_id for g in probed.gpus] == bus_ids
    assert probed.link(0, 63).type == "NV18" and probed.link(0, 63).nvswitch
    assert all(g.nvlink_active_links == 18 for g in probed.gpus)
    # The fabric graph through the real binding: 64 GPU->NVSwitch edges per switch chip (in domain 0001,
    # where c0..ff is taken), the pairs' NV18 derived from them.
    switches = sorted(node.id for node in probed.fabric.nodes if node.kind == "nvswitch")
    assert len(switches) == 6 and all(switch.startswith("pci:0001:") for switch in switches)
    assert len(probed.fabric.edges) == 64 * 6 and probed.fabric.nvlink_word(0, 63) == "NV18"
