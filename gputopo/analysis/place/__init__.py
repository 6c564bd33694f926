"""Where GPUs sit: sockets, NUMA nodes, the NICs nearest each GPU, classes of pairs."""
