"""What pasted ``nvidia-smi`` text says, judged (``gputopo.sources.evidence.pasted_smi`` read it): NVLinks
inactive (``nvlink -s``), NVLink error counters (``nvlink -e``) and the NVSwitch fabric's state and
health (``-q``'s Fabric section). One wording per finding, whichever door read it: the fabric's from
``doctor_nvml`` (the live NVML checks), an inactive link's from ``observed_findings`` (what scan says
of ``nvlink -s``).

GPUs are named as nvidia-smi numbers them (NVML's index) or by the bus id of their ``-q`` block;
a Fabric section grep cut from its GPU block is said for "a GPU the paste does not name"."""

from __future__ import annotations

from gputopo.analysis.causes.doctor_common import DoctorReport
from gputopo.analysis.causes.doctor_nvml import fabric_degraded, fabric_not_ready, nvlink_errors
from gputopo.analysis.causes.nvlink_findings import nvlinks_down
from gputopo.analysis.causes.observed_findings import nvlink_inactive_findings
from gputopo.analysis.notes.reading_notes import note_findings
from gputopo.errors import InputError
from gputopo.model import ReadingNote
from gputopo.sources.smi import nvlink
from gputopo.sources.evidence.pasted_evidence import PastedEvidence, PastedFabric

NOT_A_VALUE = ("", "N/A", "Not Supported", "[N/A]", "[Not Supported]")
# The counters judged, as the live check judges NVML's (replay, recovery, CRC flit / data); others a newer
# nvidia-smi prints (symbol errors, before forward error correction, are normal on a healthy link) are not.
JUDGED_COUNTERS = ("replay", "recovery", "crc")
COUNTER_MAX_16BIT = 65535


def nvlink_checks(label: str, evidence: PastedEvidence, report: DoctorReport) -> None:
    _inactive(label, evidence, report)
    _errors(label, evidence, report)


def _inactive(label: str, evidence: PastedEvidence, report: DoctorReport) -> None:
    """``nvidia-smi nvlink -s`` read as scan reads it (``sources.smi.nvlink``) and judged by scan's rules:
    a GPU with fewer active links than its peers of the same model (``nvlink-links-down``), links
    ``<inactive>`` (``nvlink-inactive``: the model on the ``GPU N:`` line says whether its board wires
    every link)."""
    if not evidence.nvlink_status:
        return
    try:
        topology = nvlink.read("\n".join(line for _, line in evidence.nvlink_status), label)
    except InputError:
        return
    found = nvlinks_down(topology) + nvlink_inactive_findings(topology)
    for finding in found:
        if finding.code == "nvlink-inactive":
            down = [s for s in topology.nvlinks if s.gpu in finding.gpus and s.active is False]
            finding.evidence = [f"{label}: GPU {s.gpu} Link {s.link}: <inactive>" for s in down[:6]]
        report.add(finding)
    # A list the paste elided: its links left out are unknown. The reader numbered the lines kept for it:
    # the note names the paste's own line numbers.
    cut = [ReadingNote(n.code, {**n.facts, "lines": [evidence.nvlink_status[k - 1][0] for k in n.facts["lines"]]}, n.gpus)
           for n in topology.reading_notes if n.code == "nvlink-list-cut"]
    for finding in note_findings(cut):
        report.add(finding)
    report.check("nvlink status", "problem" if any(f.severity != "info" for f in found) else "ok",
                 f"{len(topology.nvlinks)} link(s) of {len(topology.gpus)} GPU(s) in {label}")


def _counted(name: str, count: int) -> str:
    saturated = (" (the largest 16-bit count: the counter may have stopped there, the real count higher)"
                 if count == COUNTER_MAX_16BIT else "")
    return f"{name} {count}{saturated}"


def _errors(label: str, evidence: PastedEvidence, report: DoctorReport) -> None:
    if not evidence.nvlink_errors:
        return
    counted = sum(len(links) for links in evidence.nvlink_errors.values())
    erring_gpus = 0
    for gpu, links in sorted(evidence.nvlink_errors.items()):
        erring = {link: {k: v for k, v in counters.items() if v and any(word in k for word in JUDGED_COUNTERS)}
                  for link, counters in sorted(links.items())}
        erring = {link: counters for link, counters in erring.items() if counters}
        if not erring:
            continue
        erring_gpus += 1
        shown = [f"link {n}: " + ", ".join(_counted(k, v) for k, v in counters.items()) for n, counters in erring.items()]
        report.add(nvlink_errors(f"GPU {gpu}", gpu, shown, [f"{label}: GPU {gpu} {s}" for s in shown[:6]]))
    report.check("nvlink errors", "problem" if erring_gpus else "ok",
                 f"{counted} link(s) of {len(evidence.nvlink_errors)} GPU(s) counted in {label}")


def fabric_checks(label: str, evidence: PastedEvidence, report: DoctorReport) -> None:
    """A finding per GPU whose fabric is not ready or not healthy; one check for the paste."""
    if not evidence.fabric:
        return
    outcomes = [_fabric(label, fabric, report) for fabric in evidence.fabric]
    said = {word: outcomes.count(word) for word in ("registered", "no fabric", "problem") if word in outcomes}
    report.check("nvswitch fabric", "problem" if "problem" in said else "ok",
                 f"{len(outcomes)} Fabric section(s) in {label}: "
                 + ", ".join(f"{n} {'with a problem' if word == 'problem' else word}" for word, n in said.items())
                 + (" (State N/A: no NVSwitch fabric to register with)" if "no fabric" in said else ""))


def _fabric(label: str, fabric: PastedFabric, report: DoctorReport) -> str:
    """``registered``, ``no fabric`` or ``problem`` (a finding said)."""
    state, status = fabric.fields.get("State", ""), fabric.fields.get("Status", "")
    summary, bandwidth = fabric.fields.get("Health/Summary", ""), fabric.fields.get("Health/Bandwidth", "")
    who = report.label(fabric.gpu) if fabric.gpu else "A GPU (the paste does not say which)"
    where = f"{label} line {fabric.line}: Fabric State {state or '?'}, Status {status or '?'}"
    if state in NOT_A_VALUE:
        return "no fabric"
    gpus = report.indices([fabric.gpu]) if fabric.gpu else []
    if state != "Completed" or status != "Success":
        if fabric.gpu:
            report.mark_gpu(fabric.gpu, "nvlink-down")
        fabric_not_ready(report, who, f"State {state}, Status {status}", gpus, [where],
                         refused=state == "Completed" and status not in (*NOT_A_VALUE, ""))
        return "problem"
    if summary not in (*NOT_A_VALUE, "Healthy") or bandwidth not in (*NOT_A_VALUE, "Full"):
        fabric_degraded(report, who, f"its health as {summary or '?'} (bandwidth {bandwidth or '?'})", gpus,
                        [f"{where}, Health Summary {summary or '?'}, Bandwidth {bandwidth or '?'}"])
        return "problem"
    return "registered"
