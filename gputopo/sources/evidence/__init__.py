"""Health evidence for doctor: pasted lspci, kernel logs, setpci, env, NCCL WARN lines, nvidia-smi one-liners; this host's health gathered."""
