"""The drains: BPF maps read every interval into Recording rows (CPU, threads, telemetry, GPU)."""
