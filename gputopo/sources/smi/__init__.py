"""nvidia-smi's outputs: `topo -m`/`-p2p` matrices, `-q`, `nvlink -s`."""
