"""Record what this machine's real NVML answers to gputopo's probe and doctor (tests/nvml_recording.py).

Writes one JSON file: ``calls`` (every NVML call the probe and doctor's NVML reader made, with the
real answers), ``topology`` (what the probe made of them here) and ``nvml_health`` (the repr of what
doctor's NVML reader made of them). tests/unit/test_hardware_corpus.py replays ``calls`` and checks
that today's code makes the same of them.

Usage: PYTHONPATH=<repo>:<repo>/tests python3 tests/hardware/record_nvml.py OUT.json
"""
import json
from importlib.metadata import version as _version
import sys

import pynvml
from nvml_recording import Recorder

from gputopo.sources.host.nvml import probe
from gputopo.sources.host.nvml_health import read_nvml_health


def main() -> None:
    recorder = Recorder(pynvml)
    topology = probe(nvml=recorder)
    health = read_nvml_health(nvml=recorder)
    data = {"calls": recorder.calls, "topology": topology.to_dict(), "nvml_health": repr(health),
            "nvidia_ml_py": _version("nvidia-ml-py")}
    with open(sys.argv[1], "w") as out:
        json.dump(data, out, indent=1)
        out.write("\n")
    print(f"recorded {len(recorder.calls)} NVML calls; {len(topology.gpus)} GPUs")


if __name__ == "__main__":
    main()
