"""Print what the real NVML answers to every query gputopo's probe makes, one line each.

Run on a machine with a real NVIDIA driver (tests/hardware/device_check.sh does). The output
is the ground truth the Python fake (tests/fake_nvml.py) and the C fake (tests/fake_libnvml/)
must match in shape: which queries fail, with which NVML error, on which kind of machine.
Nothing here decides anything; it records.
"""
import ctypes
import json
import sys

import pynvml as N


def call(name, *args):
    fn = getattr(N, name, None)
    if fn is None:
        return {"query": name, "missing_in_binding": True}
    try:
        value = fn(*args)
    except N.NVMLError as e:  # the real binding's error, with the real code
        return {"query": name, "args": [a for a in args if isinstance(a, int)],
                "error": str(e), "code": getattr(e, "value", None)}
    except Exception as e:  # a binding trap: say which
        return {"query": name, "exception": type(e).__name__, "text": str(e)}
    return {"query": name, "value": shape(value)}


def shape(v):
    if isinstance(v, (bytes, bytearray)):
        return v.decode("utf-8", "replace")
    if isinstance(v, (str, int, float, bool)) or v is None:
        return v
    if isinstance(v, (list, tuple)):
        return [shape(x) for x in v]
    if isinstance(v, ctypes.Array):
        return [shape(x) for x in v]
    fields = getattr(v, "_fields_", None)
    if fields:
        return {f[0]: shape(getattr(v, f[0])) for f in fields}
    return repr(v)


def main():
    out = []
    N.nvmlInit()
    for q in ("nvmlSystemGetDriverVersion", "nvmlSystemGetNVMLVersion", "nvmlSystemGetCudaDriverVersion"):
        out.append(call(q))
    n = N.nvmlDeviceGetCount()
    out.append({"query": "nvmlDeviceGetCount", "value": n})
    for i in range(n):
        h = N.nvmlDeviceGetHandleByIndex(i)
        for q in ("nvmlDeviceGetName", "nvmlDeviceGetUUID", "nvmlDeviceGetPciInfo",
                  "nvmlDeviceGetCudaComputeCapability", "nvmlDeviceGetMemoryInfo",
                  "nvmlDeviceGetUtilizationRates", "nvmlDeviceGetMigMode",
                  "nvmlDeviceGetComputeRunningProcesses", "nvmlDeviceGetNumaNodeId",
                  "nvmlDeviceGetCurrPcieLinkGeneration", "nvmlDeviceGetCurrPcieLinkWidth",
                  "nvmlDeviceGetMaxPcieLinkGeneration", "nvmlDeviceGetMaxPcieLinkWidth",
                  "nvmlDeviceGetPersistenceMode",
                  "nvmlDeviceGetPcieReplayCounter", "nvmlDeviceGetEccMode",
                  "nvmlDeviceGetVirtualizationMode", "nvmlDeviceGetBoardPartNumber"):
            r = call(q, h)
            r["gpu"] = i
            out.append(r)
        if hasattr(N, "nvmlMemory_v2"):
            r = call("nvmlDeviceGetMemoryInfo", h, N.nvmlMemory_v2)
            r["gpu"], r["version"] = i, 2
            out.append(r)
        for q in ("nvmlDeviceGetCpuAffinity", "nvmlDeviceGetMemoryAffinity"):
            r = call(q, h, 4)
            if q == "nvmlDeviceGetMemoryAffinity" and "exception" in r:
                r = call(q, h, 4, 0)
            if q == "nvmlDeviceGetCpuAffinity" and "exception" in r:
                r = call(q, h, 4)
            r["gpu"] = i
            out.append(r)
        for ctype, query, version in (("c_nvmlGpuFabricInfoV_t", "nvmlDeviceGetGpuFabricInfoV", "nvmlGpuFabricInfo_v2"),
                                      ("c_nvmlGpuFabricInfo_t", "nvmlDeviceGetGpuFabricInfo", None)):
            cls = getattr(N, ctype, None)
            if cls is None or not hasattr(N, query):
                out.append({"query": query, "missing_in_binding": True, "gpu": i})
                continue
            info = cls()
            if version:
                info.version = getattr(N, version, (2 << 24) | 36)
            r = call(query, h, ctypes.byref(info))
            r["filled"], r["gpu"] = shape(info), i
            out.append(r)
        for link in range(getattr(N, "NVML_NVLINK_MAX_LINKS", 18)):
            for q in ("nvmlDeviceGetNvLinkState", "nvmlDeviceGetNvLinkVersion",
                      "nvmlDeviceGetNvLinkRemotePciInfo", "nvmlDeviceGetNvLinkRemoteDeviceType"):
                r = call(q, h, link)
                r["gpu"], r["link"] = i, link
                out.append(r)
            r = call("nvmlDeviceGetNvLinkErrorCounter", h, link, 0)
            r["gpu"], r["link"] = i, link
            out.append(r)
        for j in range(n):
            if j == i:
                continue
            hj = N.nvmlDeviceGetHandleByIndex(j)
            out.append(call("nvmlDeviceGetTopologyCommonAncestor", h, hj))
            for idx in range(5):
                r = call("nvmlDeviceGetP2PStatus", h, hj, idx)
                r["index"] = idx
                out.append(r)
    N.nvmlShutdown()
    json.dump(out, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main()
