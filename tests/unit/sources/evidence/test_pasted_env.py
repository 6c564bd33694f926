from gputopo.sources.evidence.pasted_health import parse_pasted


def _env(text):
    return [(s.name, s.value) for s in parse_pasted(text).facts.env]


def test_env_export_prefix_and_docker_e_are_read():
    assert _env("NCCL_P2P_DISABLE=1\nexport NCCL_P2P_LEVEL='LOC'\nNCCL_SHM_DISABLE=1 python t.py") == [
        ("NCCL_P2P_DISABLE", "1"), ("NCCL_P2P_LEVEL", "LOC"), ("NCCL_SHM_DISABLE", "1")]
    assert _env("docker run --gpus all -e NCCL_IB_DISABLE=1 --env=CUDA_VISIBLE_DEVICES=0,1 img") == [
        ("NCCL_IB_DISABLE", "1"), ("CUDA_VISIBLE_DEVICES", "0,1")]


def test_a_variable_named_in_a_log_or_prose_is_not_set():
    line = "h:1:2 [0] NCCL INFO P2P is disabled ... You can repress this message with NCCL_IGNORE_DISABLED_P2P=1."
    assert _env(line) == []


def test_cuda_visible_devices_alone_is_no_health_evidence():
    assert parse_pasted("export CUDA_VISIBLE_DEVICES=0,1").kinds == []


def test_docker_run_shm_options_across_continued_lines():
    runs = parse_pasted("docker run --gpus all \\\n  --shm-size=16g img\ndocker run --ipc=host img\n"
                        "docker run --gpus all img").facts.docker_runs
    assert [(r.shm_option, r.shm_bytes) for r in runs] == [("--shm-size=16g", 16 << 30), ("--ipc=host", None),
                                                           (None, None)]
