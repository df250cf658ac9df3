"""CUTLASS 3 sm90 GEMMs (y = x @ W.T, fp16, fp32 accumulation) built with nvcc, called through ctypes, timed
against cuBLAS: the measurement behind issue 22 targets 2 and 3 (a GEMM we control that matches cuBLAS)."""
