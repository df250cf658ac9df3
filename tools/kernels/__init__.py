"""GPU kernel checks and micro-benchmarks (run on a machine with an NVIDIA GPU)."""
