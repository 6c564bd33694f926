from gputopo.sources.evidence.pasted_health import parse_pasted


def _codes(text):
    return [e.code for e in parse_pasted(text).facts.cuda_errors]


def test_codes_by_number_name_and_message():
    assert _codes("CUDA error 217 at ggml-cuda.cu:6292: x") == [217]
    assert _codes("CUDA error at bandwidthTest.cu:256 code=802(cudaErrorSystemNotReady)") == [802]
    assert _codes("warning: Cuda API error detected: cudaDeviceEnablePeerAccess returned (0x2c0)") == [704]
    assert _codes("make: *** [all] Error 217") == []


def test_an_nccl_log_line_is_left_to_the_nccl_reader():
    assert _codes("h:1:2 [0] transport/p2p.cc:238 NCCL WARN failed to open CUDA IPC handle : 217 peer access "
                  "is not supported between these two devices") == []


def test_simple_p2p_and_kmcuda_answers():
    answers = parse_pasted("> Peer access from Tesla K40m (GPU0) -> Tesla K40m (GPU1) : Yes\n"
                           "warning: p2p 2 <-> 0 is impossible").facts.peer_answers
    assert [(a.a, a.b, a.can) for a in answers] == [(0, 1, True), (2, 0, False)]
    assert answers[0].names == ("Tesla K40m", "Tesla K40m")


def test_too_many_peers_by_message_name_or_number():
    """llama.cpp#21883 prints the message alone; TF the driver's name; others the number."""
    for line in ("CUDA error: peer mapping resources exhausted",
                 "failed to enable peer access from 0x7f to 0x7e: CUDA_ERROR_TOO_MANY_PEERS: peer mapping resources exhausted",
                 "cudaDeviceEnablePeerAccess failed: CUDA error 711"):
        assert [e.code for e in parse_pasted(line + "\n").facts.cuda_errors] == [711], line
