"""``gputopo train --launcher slurm`` under a real Slurm (Debian's slurmctld, slurmd, slurm-client and
munge), started here in a temporary folder on loopback only and torn down after, with no process left.

One node (``localhost``) runs both tasks of ``srun -N1 -n2``: the plan has two entries for it, from
two different snapshots, told apart by ``SLURM_LOCALID``. Where the kernel allows it every daemon,
``srun`` and the training run in a private network namespace with nothing but ``lo``
(127.0.0.1, and 192.0.2.1 so that Slurm finds an IPv4 address to bind to).
Without the packages (or without root) the test is skipped with one line.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from cluster_plans import cluster_plan, write_plan

pytestmark = pytest.mark.tf

BINARIES = ("slurmctld", "slurmd", "srun", "sinfo", "squeue", "scancel", "munged")
SKIP_REASON = "slurm not installed: Slurm test skipped (apt-get install slurmctld slurmd slurm-client munge)"
WAIT_S = 60.0
TRAIN_TIMEOUT_S = 300.0
NODE = "localhost"

LOOPBACK_UP = (
    "import fcntl, socket, struct, sys\n"
    "s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
    "r = struct.pack('16sH14x', b'lo', 0)\n"
    "flags = struct.unpack('16sH14x', fcntl.ioctl(s.fileno(), 0x8913, r))[1]\n"
    "fcntl.ioctl(s.fileno(), 0x8914, struct.pack('16sH14x', b'lo', flags | 1))\n"
    # A second address on lo (TEST-NET-1, never routed): Slurm binds through getaddrinfo(AI_ADDRCONFIG),
    # which finds no IPv4 in a namespace that has only 127.0.0.1.
    "alias = lambda address: struct.pack('16sHH4s8x', b'lo:1', socket.AF_INET, 0, socket.inet_aton(address))\n"
    "fcntl.ioctl(s.fileno(), 0x8916, alias('192.0.2.1'))\n"
    "fcntl.ioctl(s.fileno(), 0x891c, alias('255.255.255.255'))\n"
    "print('ready', flush=True)\n"
    "sys.stdin.read()\n"
)


def _which(name: str) -> str | None:
    for folder in os.environ.get("PATH", "").split(os.pathsep) + ["/usr/sbin", "/sbin"]:
        path = Path(folder) / name
        if path.is_file() and os.access(path, os.X_OK):
            return str(path)
    return None


def _free_port_pair() -> int:
    """A port p above 20000 with p and p + 1 free on loopback (the two tasks' gRPC servers)."""
    for _ in range(200):
        with socket.socket() as first, socket.socket() as second:
            try:
                first.bind(("127.0.0.1", 0))
                port = first.getsockname()[1]
                if port <= 20000 or port >= 65535:
                    continue
                second.bind(("127.0.0.1", port + 1))
                return port
            except OSError:
                continue
    raise RuntimeError("no two consecutive free ports on loopback")


@dataclass
class SlurmCluster:
    """Our munged, slurmctld and slurmd, and how to run a Slurm client among them."""

    root: Path
    conf: Path
    holder: subprocess.Popen | None = None  # the process holding the private network namespace
    daemons: dict[str, subprocess.Popen] = field(default_factory=dict)

    def command(self, argv: list[str]) -> list[str]:
        """``argv`` run in the cluster's network namespace (when it has one)."""
        if self.holder is None:
            return list(argv)
        return [_which("nsenter") or "nsenter", f"--net=/proc/{self.holder.pid}/ns/net", "--", *argv]

    @property
    def env(self) -> dict[str, str]:
        return {**os.environ, "SLURM_CONF": str(self.conf)}

    def run(self, *argv: str, timeout_s: float = 30.0) -> subprocess.CompletedProcess:
        return subprocess.run(self.command(list(argv)), env=self.env, capture_output=True, text=True, timeout=timeout_s)

    def start(self, name: str, argv: list[str]) -> None:
        log = open(self.root / f"{name}.out", "wb")
        self.daemons[name] = subprocess.Popen(
            self.command(argv), env=self.env, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT
        )
        log.close()

    def logs(self) -> str:
        parts = []
        for path in sorted(self.root.glob("*.log")) + sorted(self.root.glob("*.out")):
            tail = path.read_text(errors="replace").splitlines()[-15:]
            parts.append(f"--- {path.name}\n" + "\n".join(tail))
        return "\n".join(parts)


def _private_network() -> subprocess.Popen | None:
    unshare = _which("unshare")
    if unshare is None or _which("nsenter") is None:
        return None
    try:
        holder = subprocess.Popen([unshare, "--net", "--", sys.executable, "-c", LOOPBACK_UP], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)  # fmt: skip
    except OSError:
        return None
    if holder.stdout.readline().strip() != "ready":
        holder.kill()
        holder.wait()
        return None
    return holder


def _wait_for(what: str, check, cluster: SlurmCluster, wait_s: float = WAIT_S, srun: tuple | None = None) -> None:
    """Wait (bounded) until ``check()``; fail at once, with the logs, if a daemon or ``srun`` ends first.
    ``srun``: ``(process, folder of its tasks' output)``."""
    deadline_s = time.monotonic() + wait_s
    watched = dict(cluster.daemons)
    if srun is not None:
        watched["srun"] = srun[0]
    while time.monotonic() < deadline_s:
        if check():
            return
        for name, process in watched.items():
            if process.poll() is not None:
                tasks = _errors(srun[1]) if srun is not None else ""
                pytest.fail(f"{name} exited with status {process.returncode} while waiting for {what}\n{tasks}\n"
                            f"{cluster.logs()}")  # fmt: skip
        time.sleep(0.5)
    tasks = f"{_errors(srun[1])}\n{_children_state(srun[1])}" if srun is not None else ""
    pytest.fail(f"{what} not within {wait_s:g} s\n{tasks}\n{cluster.logs()}")


def _children_state(folder: Path) -> str:
    """What the training children of a run are doing (for a failure message)."""
    lines = []
    for task_index, pid in sorted(_training_children(folder).items()):
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            threads = [(t / "wchan").read_text() for t in Path(f"/proc/{pid}/task").iterdir()]
        except OSError:
            continue
        cpu_s = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        lines.append(f"child of task {task_index}: pid {pid}, state {fields[0]}, {cpu_s:.1f} s CPU, "
                     f"threads waiting in {sorted(set(threads))}")  # fmt: skip
    checkpoints = sorted(p.name for p in folder.parent.glob("ckpt/*")) + sorted(p.name for p in folder.parent.glob("ckpt/.*"))
    return "\n".join(lines + [f"checkpoint folder: {checkpoints}"])


def _slurm_conf(root: Path, munge_socket: Path, ctld_port: int, slurmd_port: int) -> str:
    return f"""ClusterName=gputopotest
SlurmctldHost={NODE}(127.0.0.1)
SlurmctldPort={ctld_port}
SlurmdPort={slurmd_port}
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={munge_socket}
SlurmUser=root
SlurmdUser=root
StateSaveLocation={root}/state
SlurmdSpoolDir={root}/spool
SlurmctldPidFile={root}/slurmctld.pid
SlurmdPidFile={root}/slurmd.pid
SlurmctldLogFile={root}/slurmctld.log
SlurmdLogFile={root}/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/builtin
SwitchType=switch/none
ReturnToService=2
MpiDefault=none
NodeName={NODE} NodeHostname={NODE} NodeAddr=127.0.0.1 CPUs=2 State=UNKNOWN
PartitionName=debug Nodes={NODE} Default=YES MaxTime=INFINITE State=UP
"""


def _our_processes(root: Path, pids: list[int]) -> list[str]:
    """Processes still alive that we started: the daemons, or anything whose command line or
    working folder is in our temporary folder (the training tasks and their children)."""
    left = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
            cwd = os.readlink(entry / "cwd")
            state = next((line for line in (entry / "status").read_text().splitlines() if line.startswith("State:")), "")
        except OSError:
            continue
        if "zombie" in state:
            continue
        if int(entry.name) in pids or str(root) in cmdline or cwd.startswith(str(root)) or cmdline.startswith("slurmstepd"):
            left.append(f"{entry.name}: {cmdline}")
    return left


def cluster_root(tmp_path_factory, name: str) -> tuple[Path, Path, Path]:
    """A fresh folder for one loopback cluster (skipped where Slurm is not installed or not root):
    (the folder, munge's key, munge's socket), with munge's, slurmctld's and slurmd's folders."""
    missing = [binary for binary in BINARIES if _which(binary) is None]
    if missing or os.geteuid() != 0:
        pytest.skip(SKIP_REASON)
    root = tmp_path_factory.mktemp(name)
    root.chmod(0o755)
    for folder in ("munge", "state", "spool"):
        (root / folder).mkdir()
    (root / "munge").chmod(0o700)
    key = root / "munge" / "munge.key"
    key.write_bytes(os.urandom(1024))
    key.chmod(0o400)
    return root, key, root / "munge" / "socket"


def start_munged_and_slurmctld(cluster: SlurmCluster, key: Path, munge_socket: Path) -> None:
    """munged on the cluster's own key and socket, then slurmctld on its slurm.conf."""
    root = cluster.root
    cluster.start("munged", [_which("munged"), "--foreground", "--force", f"--socket={munge_socket}",
                             f"--key-file={key}", f"--pid-file={root}/munge/munged.pid",
                             f"--log-file={root}/munged.log", f"--seed-file={root}/munge/seed"])  # fmt: skip
    _wait_for("munged's socket", munge_socket.exists, cluster)
    cluster.start("slurmctld", [_which("slurmctld"), "-D", "-f", str(cluster.conf)])


@pytest.fixture(scope="module")
def slurm_cluster(tmp_path_factory):
    root, key, munge_socket = cluster_root(tmp_path_factory, "slurm")
    ctld_port, slurmd_port = _free_port_pair(), _free_port_pair()
    conf = root / "slurm.conf"
    conf.write_text(_slurm_conf(root, munge_socket, ctld_port, slurmd_port), encoding="utf-8")
    cluster = SlurmCluster(root=root, conf=conf, holder=_private_network())
    try:
        start_munged_and_slurmctld(cluster, key, munge_socket)
        cluster.start("slurmd", [_which("slurmd"), "-D", "-f", str(conf), "-N", NODE])
        _wait_for(f"node {NODE} idle in sinfo",
                  lambda: cluster.run("sinfo", "-h", "-N", "-o", "%t").stdout.strip() == "idle", cluster)  # fmt: skip
        yield cluster
    finally:
        _tear_down(cluster)


def _tear_down(cluster: SlurmCluster) -> None:
    pids = [daemon.pid for daemon in cluster.daemons.values()]
    if "slurmctld" in cluster.daemons and cluster.daemons["slurmctld"].poll() is None:
        cluster.run("scancel", "--user", "root", timeout_s=15)
        deadline_s = time.monotonic() + 30
        while time.monotonic() < deadline_s and cluster.run("squeue", "-h", timeout_s=15).stdout.strip():
            time.sleep(0.5)
    for name in ("slurmd", "slurmctld", "munged"):  # the reverse of the start
        daemon = cluster.daemons.get(name)
        if daemon is None or daemon.poll() is not None:
            continue
        daemon.send_signal(signal.SIGTERM)
        try:
            daemon.wait(timeout=20)
        except subprocess.TimeoutExpired:
            daemon.kill()
            daemon.wait()
    if cluster.holder is not None:
        cluster.holder.stdin.close()
        cluster.holder.wait(timeout=10)
    deadline_s = time.monotonic() + 20
    while _our_processes(cluster.root, pids) and time.monotonic() < deadline_s:
        time.sleep(0.5)
    left = _our_processes(cluster.root, pids)
    assert not left, "processes left after the Slurm test:\n" + "\n".join(left)


def _train_command(plan_path: str, checkpoint_dir: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "gputopo", "train", "--launcher", "slurm", "--plan", plan_path,
            "--cpu-devices", "1", "--strategy", "multi-worker", "--data", "synthetic", "--batch-size", "8",
            "--no-eval", "--checkpoint-dir", str(checkpoint_dir), "--startup-timeout", "120", "--json", *extra]  # fmt: skip


def _srun(cluster: SlurmCluster, folder: Path, command: list[str]) -> list[str]:
    folder.mkdir(exist_ok=True)
    return cluster.command(["srun", "-N1", "-n2", "--kill-on-bad-exit=1", f"--chdir={folder}",
                            f"--output={folder}/task-%t.out", f"--error={folder}/task-%t.err", *command])  # fmt: skip


def _results(folder: Path) -> list[dict]:
    return [json.loads((folder / f"task-{t}.out").read_text()) for t in range(2)]


def _errors(folder: Path) -> str:
    return "\n".join(f"--- task {t}:\n{(folder / f'task-{t}.err').read_text(errors='replace')}" for t in range(2)
                     if (folder / f"task-{t}.err").exists())  # fmt: skip


def _plan(folder: Path) -> str:
    """Two entries for the one node, from two different snapshots (GPUs, NUMA node, NICs)."""
    folder.mkdir(exist_ok=True)
    return write_plan(folder / "plan.json", cluster_plan([NODE, NODE], port=_free_port_pair()))


def test_two_slurm_tasks_train_together_each_with_its_own_host_plan(slurm_cluster, tmp_path):
    plan_path = _plan(tmp_path)
    run = subprocess.run(_srun(slurm_cluster, tmp_path / "run", _train_command(plan_path, tmp_path / "ckpt",
                                                                               "--steps-per-epoch", "4")),
                         env=slurm_cluster.env, capture_output=True, text=True, timeout=TRAIN_TIMEOUT_S)  # fmt: skip
    assert run.returncode == 0, f"{run.stderr}\n{_errors(tmp_path / 'run')}\n{slurm_cluster.logs()}"
    first, second = _results(tmp_path / "run")
    # Each task applied its own entry (SLURM_LOCALID 0 and 1): other GPUs and NICs, same NCCL keys.
    assert [r["launch"]["entry"]["task_index"] for r in (first, second)] == [0, 1]
    assert (first["plan"]["env"]["NCCL_IB_HCA"], second["plan"]["env"]["NCCL_IB_HCA"]) == ("=mlx5_0,mlx5_1", "=mlx5_3")
    assert (first["plan"]["env"]["NCCL_SOCKET_IFNAME"], second["plan"]["env"]["NCCL_SOCKET_IFNAME"]) == ("ib0", "ens1f0")
    assert first["plan"]["env"]["CUDA_VISIBLE_DEVICES"] == second["plan"]["env"]["CUDA_VISIBLE_DEVICES"] == ""
    assert "GPUs 0,1,2,3" in first["plan"]["notes"][0] and "GPUs 4,5,6,7" in second["plan"]["notes"][0]
    # One MultiWorkerMirroredStrategy: both workers, same steps, the very same weights.
    assert first["launch"]["task"].startswith(f"Slurm task 0 on {NODE} (worker 0, {NODE}:")
    assert first["workers"] == second["workers"] == 2
    assert first["steps"] == second["steps"] == 4
    assert first["weights_sha256"] == second["weights_sha256"]
    assert (tmp_path / "ckpt" / "ckpt-4.index").exists()  # the chief wrote it on the shared folder


def test_a_killed_task_is_named_and_resume_continues_from_the_shared_checkpoint(slurm_cluster, tmp_path):
    plan_path = _plan(tmp_path)
    checkpoint_dir = tmp_path / "ckpt"
    run = subprocess.Popen(_srun(slurm_cluster, tmp_path / "killed", _train_command(
        plan_path, checkpoint_dir, "--steps-per-epoch", "100000", "--checkpoint-every", "2")),
        env=slurm_cluster.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
    try:
        # Any checkpoint, not ckpt-2 itself: the manager keeps only the newest few, so on a fast run
        # ckpt-2 can come and go between two looks (the test then waited for ever, and failed).
        _wait_for("the first checkpoint", lambda: any(checkpoint_dir.glob("ckpt-*.index")), slurm_cluster,
                  wait_s=TRAIN_TIMEOUT_S, srun=(run, tmp_path / "killed"))  # fmt: skip
        child = _training_child(tmp_path / "killed", task_index=1)
        os.kill(child, signal.SIGKILL)
        run.communicate(timeout=120)
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()
    assert run.returncode != 0
    # srun can return before every process of the step has gone: the chief's training child, stopped
    # by SIGTERM, saves one more checkpoint and still holds the folder's lock until it exits.
    deadline_s = time.monotonic() + WAIT_S
    while _training_children(tmp_path / "killed") and time.monotonic() < deadline_s:
        time.sleep(0.5)
    assert not _training_children(tmp_path / "killed"), "the killed run's training children did not end"
    errors = (tmp_path / "killed" / "task-1.err").read_text()
    assert f"gputopo: error: the Slurm task 1 on {NODE} (worker 1, {NODE}:" in errors and "was killed by SIGKILL" in errors
    saved = max(int(p.name[len("ckpt-"):-len(".index")]) for p in checkpoint_dir.glob("ckpt-*.index"))

    resumed = subprocess.run(_srun(slurm_cluster, tmp_path / "resumed", _train_command(
        plan_path, checkpoint_dir, "--steps-per-epoch", str(saved + 2), "--resume")),
        env=slurm_cluster.env, capture_output=True, text=True, timeout=TRAIN_TIMEOUT_S)  # fmt: skip
    assert resumed.returncode == 0, f"{resumed.stderr}\n{_errors(tmp_path / 'resumed')}"
    first, second = _results(tmp_path / "resumed")
    assert first["start_step"] == second["start_step"] == saved
    assert first["steps"] == second["steps"] == saved + 2
    assert first["weights_sha256"] == second["weights_sha256"]


def _training_children(folder: Path) -> dict[int, int]:
    """The training children (``python -m gputopo.train.child``) running in ``folder``: task index -> pid."""
    children = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().decode(errors="replace").split("\0")
            cwd = os.readlink(entry / "cwd")
            zombie = "zombie" in (entry / "status").read_text()
        except OSError:
            continue
        if cwd == str(folder) and "gputopo.train.child" in argv and not zombie:
            children[int(argv[argv.index("--task-index") + 1]) if "--task-index" in argv else 0] = int(entry.name)
    return children


def _training_child(folder: Path, task_index: int) -> int:
    """The pid of one task's training child."""
    children = _training_children(folder)
    assert task_index in children, f"no training child of task {task_index} in {folder}"
    return children[task_index]


def test_scancel_stops_both_tasks_at_one_step_and_saves_it(slurm_cluster, tmp_path):
    """``scancel`` (as a job's time limit does) sends SIGTERM to every process of every task, then
    SIGKILL after KillWait; each worker sees it at its own step. Both stop after one agreed step,
    save it, and end with their summaries (exit 130). Before, the first to see it entered its save
    while the other entered the next step's all-reduce: a lost worker, nothing saved. (That needs
    the two to see the signal at different steps, which scancel makes likely but not certain;
    tests/system/test_train_stop.py signals one worker only, which fails every time without the fix.)"""
    plan_path = _plan(tmp_path)
    checkpoint_dir = tmp_path / "ckpt"
    folder = tmp_path / "cancelled"
    run = subprocess.Popen(_srun(slurm_cluster, folder, _train_command(
        plan_path, checkpoint_dir, "--steps-per-epoch", "100000", "--checkpoint-every", "2")),
        env=slurm_cluster.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
    try:
        _wait_for("the first checkpoint", lambda: any(checkpoint_dir.glob("ckpt-*.index")), slurm_cluster,
                  wait_s=TRAIN_TIMEOUT_S, srun=(run, folder))  # fmt: skip
        jobs = slurm_cluster.run("squeue", "-h", "-o", "%i").stdout.split()
        assert len(jobs) == 1, jobs
        cancel = slurm_cluster.run("scancel", jobs[0])
        assert cancel.returncode == 0, cancel.stderr
        run.communicate(timeout=180)
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()
    deadline_s = time.monotonic() + WAIT_S  # srun can return before every process of the step has gone
    while _training_children(folder) and time.monotonic() < deadline_s:
        time.sleep(0.5)
    assert not _training_children(folder), "the cancelled run's training children did not end"
    assert all((folder / f"task-{t}.out").read_text().strip() for t in range(2)), (
        f"a task was killed before its summary (it waited for the other worker)\n{_errors(folder)}\n{_children_state(folder)}")
    first, second = _results(folder)
    assert first["status"] == second["status"] == "interrupted", _errors(folder)
    assert first["steps"] == second["steps"]
    assert first["weights_sha256"] == second["weights_sha256"]
    assert (checkpoint_dir / f"ckpt-{first['steps']}.index").exists()  # the stop step, saved by the chief
    assert "gputopo: error" not in _errors(folder)


def _parent_of(pid: int) -> int:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(next(line.split()[1] for line in status.splitlines() if line.startswith("PPid:")))


def test_a_term_that_reaches_one_task_only_stops_both_at_one_saved_step(slurm_cluster, tmp_path):
    """SIGTERM to every process of task 1 only, as slurmstepd sends it (one node's first, or a
    user's ``kill``): task 0 is never signalled, yet stops after the same step, and the chief saves
    it before either task exits (``srun --kill-on-bad-exit`` ends the step as soon as one task exits
    with 130). Before, task 1 stopped alone: the chief lost it and nothing was saved, every time."""
    plan_path = _plan(tmp_path)
    checkpoint_dir = tmp_path / "ckpt"
    folder = tmp_path / "one-task"
    temp = tmp_path / "tmp"
    temp.mkdir()
    run = subprocess.Popen(_srun(slurm_cluster, folder, _train_command(
        plan_path, checkpoint_dir, "--steps-per-epoch", "100000", "--checkpoint-every", "100000")),
        env={**slurm_cluster.env, "TMPDIR": str(temp)}, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
    try:
        _wait_for("both workers' first step", lambda: len(list(temp.glob("gputopo-train-*/*.started"))) == 2,
                  slurm_cluster, wait_s=TRAIN_TIMEOUT_S, srun=(run, folder))  # fmt: skip
        child = _training_child(folder, task_index=1)
        task = _parent_of(child)
        os.kill(child, signal.SIGTERM)
        os.kill(task, signal.SIGTERM)
        run.communicate(timeout=180)
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()
    deadline_s = time.monotonic() + WAIT_S
    while _training_children(folder) and time.monotonic() < deadline_s:
        time.sleep(0.5)
    assert not _training_children(folder), "the run's training children did not end"
    # Whichever task exits first with 130, srun ends the step by SIGTERM to the other: its summary is
    # still written (before, the second task's parent died of it at random: no summary, CI red).
    assert all((folder / f"task-{t}.out").read_text().strip() for t in range(2)), (
        f"a task ended before its summary\n{_errors(folder)}\n{_children_state(folder)}")
    chief, stopped = _results(folder)
    assert stopped["status"] == chief["status"] == "interrupted", _errors(folder)
    saved = sorted(int(p.name[len("ckpt-"):-len(".index")]) for p in checkpoint_dir.glob("ckpt-*.index"))
    assert saved == [stopped["steps"]], f"saved {saved}, stopped at {stopped['steps']}\n{_errors(folder)}"
    assert (chief["steps"], chief["stopped_by"]) == (stopped["steps"], "another worker")
    assert chief["weights_sha256"] == stopped["weights_sha256"]
    assert "gputopo: error" not in _errors(folder)
