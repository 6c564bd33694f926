"""The files Slurm reads, as data: gres.conf lines, core indices, topology.conf blocks."""
