"""Instruments, not product: benchmarks, workloads, fidelity metrics, traces, the quantization report.
The app and the engine never import this package."""
