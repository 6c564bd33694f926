"""Other tools' outputs: p2pBandwidthLatencyTest, nvbandwidth, NCCL logs, topology XML and nccl-tests, CUDA deviceQuery peers, watch files."""
