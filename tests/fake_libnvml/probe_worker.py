"""Run gputopo's NVML probe through the REAL nvidia-ml-py on the fake libnvidia-ml.so.1.

Started by tests/system/test_fake_libnvml.py in a child process whose LD_LIBRARY_PATH holds the fake
library (the dynamic loader reads it at start-up, and pynvml dlopens "libnvidia-ml.so.1" by name).
Reads a JSON list of jobs on stdin, each ``{"snapshot": path, "sysfs_root": path or null}``; for each
it points GPUTOPO_FAKE_NVML_SNAPSHOT at the snapshot (the library reads it at every first nvmlInit)
and probes. Writes a JSON list on stdout: ``{"topology": {...}}`` or ``{"error": "one line"}``.
"""

from __future__ import annotations

import json
import os
import sys

from gputopo.errors import NvmlUnavailable
from gputopo.sources.host.nvml import probe


def main() -> None:
    jobs = json.load(sys.stdin)
    results = []
    for job in jobs:
        os.environ["GPUTOPO_FAKE_NVML_SNAPSHOT"] = job["snapshot"]
        try:
            topology = probe(sysfs_root=job.get("sysfs_root") or "/")
        except NvmlUnavailable as exc:
            results.append({"error": str(exc)})
        else:
            results.append({"topology": topology.to_dict()})
    json.dump(results, sys.stdout)


if __name__ == "__main__":
    main()
