"""FlashAttention-3's forward (CUDA/CUTLASS, sm_90a) built for the packed varlen layout, to measure it at our shapes."""
