"""gres.conf ``Cores=``: Slurm's logical core indices from the GPUs' CPU affinity (OS CPU ids)."""

from gputopo.analysis.slurm.slurm_cores import slurm_cores
from gputopo.model import Gpu


def gpus(*affinities):
    return [Gpu(index=i, cpu_affinity=cpus) for i, cpus in enumerate(affinities)]


def test_two_sockets_with_hyperthreads_numbered_after_the_cores():
    # A DGX-1: socket 0 is CPUs 0-19 and their siblings 40-59, socket 1 20-39 and 60-79.
    result = slurm_cores(gpus("0-19,40-59", "0-19,40-59", "20-39,60-79"))
    assert result.cores == {0: list(range(20)), 1: list(range(20)), 2: list(range(20, 40))}
    assert result.hyperthread_shift == 40
    assert "c+40" in result.basis and "slurmd -C" in result.basis


def test_one_socket_of_a_two_socket_box_still_shows_its_siblings():
    # Every GPU on socket 0: the other socket's CPUs are never seen, the two equal runs still tell.
    result = slurm_cores(gpus("0-19,40-59", "0-19,40-59"))
    assert result.cores == {0: list(range(20)), 1: list(range(20))}
    assert result.hyperthread_shift == 40


def test_sockets_in_blocks_without_hyperthreads_keep_the_cpu_ids():
    result = slurm_cores(gpus("0-71", "72-143"))  # two Grace CPUs
    assert result.cores == {0: list(range(72)), 1: list(range(72, 144))}
    assert result.hyperthread_shift is None


def test_interleaved_sockets_are_numbered_socket_by_socket():
    # Some BIOSes put even CPUs on socket 0 and odd ones on socket 1; Slurm numbers socket 0's cores
    # first. (Five cores a socket: with an even count, CPU c and c + half would both be even, which
    # reads as hyperthreads, below: the affinities alone cannot tell the two apart.)
    even = ",".join(str(c) for c in range(0, 10, 2))
    odd = ",".join(str(c) for c in range(1, 10, 2))
    result = slurm_cores(gpus(even, odd))
    assert result.cores == {0: list(range(5)), 1: list(range(5, 10))}
    assert result.hyperthread_shift is None
    assert "interleave" in result.basis


def test_interleaved_sockets_with_hyperthreads():
    even = ",".join(str(c) for c in range(0, 32, 2))
    odd = ",".join(str(c) for c in range(1, 32, 2))
    result = slurm_cores(gpus(even, odd))
    assert result.hyperthread_shift == 16
    assert result.cores == {0: list(range(8)), 1: list(range(8, 16))}


def test_every_gpu_near_every_cpu_gives_no_cores():
    result = slurm_cores(gpus("0-31", "0-31"))  # a one-socket workstation: any core will do
    assert result.cores == {}
    assert "any core" in result.basis


def test_no_affinity_or_overlapping_affinities_give_no_cores():
    assert slurm_cores(gpus(None, None)).cores == {}
    assert "no GPU's CPU affinity" in slurm_cores(gpus(None)).basis
    overlapping = slurm_cores(gpus("0-15", "8-23"))
    assert overlapping.cores == {} and "overlap" in overlapping.basis


def test_a_gpu_without_affinity_gets_none_and_the_others_theirs():
    result = slurm_cores(gpus("0-7", None, "8-15"))
    assert result.cores == {0: list(range(8)), 2: list(range(8, 16))}


def test_interleaved_affinities_that_miss_cores_give_no_cores():
    result = slurm_cores(gpus("0,2,4,6"))  # socket 1's cores are not seen: their place is unknown
    assert result.cores == {}
