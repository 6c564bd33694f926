#!/usr/bin/env bash
# One prepared run of gputopo on a machine with a real NVIDIA driver (the `device` tool's H100/H200).
# Records raw tool outputs, NVML's raw answers, and every gputopo command's output and exit code under
# $OUT/run, packed into $OUT/device-run.tar.gz; the console log is $OUT/log.txt.
# Usage (repo root): bash tests/hardware/device_check.sh   [needs $OUT; wheels in .whl/ if carried]
set -u
export PYTHONUNBUFFERED=1 COLUMNS=120
OUT=${OUT:?set OUT to a folder}
R="$OUT/run"; mkdir -p "$R"
exec > >(tee "$OUT/log.txt") 2>&1
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
  export PYTHONPATH=/tmp/site:$PWD
else
  export PYTHONPATH=$PWD
fi
echo "== date $(date -u +%FT%TZ)  uname $(uname -r)"
python3 -c "import sys,typer,click,rich,pynvml; from importlib.metadata import version as v; print(sys.version.split()[0], 'typer', typer.__version__, 'click', click.__version__, 'rich', v('rich'), 'nvidia-ml-py', v('nvidia-ml-py'))"
raw() { local f="$1"; shift; echo "== raw $f: $*"; timeout 60 "$@" >"$R/$f" 2>&1; echo "rc=$?"; }
raw nvidia-smi.txt nvidia-smi
raw nvidia-smi-q.txt nvidia-smi -q
raw topo-m.txt nvidia-smi topo -m
raw topo-p2p-r.txt nvidia-smi topo -p2p r
raw nvlink-s.txt nvidia-smi nvlink -s
raw nvlink-status.txt nvidia-smi nvlink --status
raw lspci-vvv.txt lspci -vvv
raw lspci-tv.txt lspci -tv
raw proc-cmdline.txt cat /proc/cmdline
raw dmesg.txt dmesg
raw cpuinfo-flags.txt sh -c "grep -m1 flags /proc/cpuinfo; nproc; grep -c ^processor /proc/cpuinfo"
raw sys-pci.txt sh -c 'for d in /sys/bus/pci/devices/*; do echo "$d $(cat $d/vendor $d/device $d/class 2>/dev/null | tr "\n" " ") numa=$(cat $d/numa_node 2>/dev/null) speed=$(cat $d/current_link_speed 2>/dev/null)/$(cat $d/max_link_speed 2>/dev/null) width=$(cat $d/current_link_width 2>/dev/null)/$(cat $d/max_link_width 2>/dev/null)"; done; ls /sys/kernel/iommu_groups 2>&1 | head; ls /sys/class/iommu 2>&1; ls /sys/devices/system/node 2>&1; cat /sys/class/dmi/id/sys_vendor /sys/class/dmi/id/product_name 2>&1; df -h /dev/shm'
raw nvml-raw.json python3 tests/hardware/nvml_raw_dump.py
raw nvml-recording.txt env PYTHONPATH="$PYTHONPATH:$PWD/tests" python3 tests/hardware/record_nvml.py "$R/nvml-recording.json"
g() { local f="$1"; shift; echo "== gputopo $* > $f"; timeout 180 python3 -m gputopo "$@" >"$R/$f" 2>"$R/$f.err"; echo "rc=$?"; head -c 3000 "$R/$f.err"; }
g scan.txt scan
g scan.json scan --json
g scan-save.txt scan --save "$R/snapshot.json"
g doctor.txt doctor
g doctor.json doctor --json
g doctor-save.txt doctor --save "$R/doctor-snapshot.json"
g recommend1.txt recommend --gpus 1
g recommend1.json recommend --gpus 1 --json
g recommend2.txt recommend --gpus 2
g recommend1-env.txt recommend --gpus 1 --format env
g report.txt report -o "$R/report.html"
g gather.txt gather -o "$R/gather.tar.gz"
g doctor-from-gather.txt doctor --from "$R/gather.tar.gz"
g scan-from-topo.txt scan --from "$R/topo-m.txt"
g scan-from-q.txt scan --from "$R/nvidia-smi-q.txt"
g scan-from-gather.txt scan --from "$R/gather.tar.gz"
g doctor-from-cmdline.txt doctor --from "$R/proc-cmdline.txt"
g doctor-from-lspci.txt doctor --from "$R/lspci-vvv.txt"
g gres.txt recommend --format gres
g nccl-topo.xml nccl-topo
g watch.jsonl watch -c 3 -i 0.5 --json
g watch-command.jsonl watch -i 0.5 --json -- sleep 2
echo "== timings (wall s, scan --json x3)"
TIMEFORMAT="%R s wall %U s user"; for i in 1 2 3; do time python3 -m gputopo scan --json >/dev/null; done
for f in scan.txt doctor.txt recommend1.txt scan-from-q.txt scan-from-gather.txt doctor-from-gather.txt; do echo "---- $f"; head -c 6000 "$R/$f"; done
tar czf "$OUT/device-run.tar.gz" -C "$OUT" run && rm -rf "$R"
ls -la "$OUT"
