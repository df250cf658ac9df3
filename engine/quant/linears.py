"""The quantized linears: SVDQuant W4A4, W8A8 int8 and W8A8 FP8, each built from an `nn.Linear` with
`from_linear` (calibrated) or `empty_like` (to load into). Numerics: `kernels/w4a4_ref.py`,
`kernels/int8_ref.py` and `kernels/fp8_ref.py` (the contracts every backend matches)."""
from __future__ import annotations

import functools
from pathlib import Path

import torch
from torch import nn

from engine.fileio import atomic_write
from engine.folders import user_folders
from engine.quant.config import FP8_ALIGN, QuantConfig
from kernels import fp8, int8, w4a4_cuda
from kernels._triton import HAS_TRITON
from kernels.fp8_ref import FP8_DTYPE, fp8_linear_ref, quantize_rows_fp8_ref, smoothed_rows
from kernels.int8_ref import int8_linear_ref, quantize_rows_int8_ref
from kernels.numerics import ieee_reciprocal
from kernels.w4a4_ref import (
    GROUP,
    pack_int4,
    quantize_act_lowrank_ref,
    quantize_groups_ref,
    w4a4_linear_ref,
)

W4A4_LABELS = {"cuda": "W4A4 INT4-MMA", "ref": "W4A4 PyTorch reference"}  # Triton's names its MMA
FP8_LABELS = {"scaled_mm": "W8A8 FP8", "ref": "W8A8 FP8 PyTorch reference"}
INT8_LABELS = {"triton": "W8A8 int8-MMA Triton", "ref": "W8A8 int8 PyTorch reference"}


def smoothing_factors(act_amax: torch.Tensor, weight: torch.Tensor, alpha: float | None) -> torch.Tensor:
    """SmoothQuant/SVDQuant lambda_j = max|X_j|^a / max|W_:,j|^(1-a) per input channel j, fp32 [K].

    Dividing x by lambda and multiplying W's columns by it leaves x W^T unchanged while moving
    activation outliers into the weights, where the low-rank branch absorbs them.
    """
    k = weight.shape[1]
    if alpha is None:
        return torch.ones(k, dtype=torch.float32, device=weight.device)
    a = act_amax.float().to(weight.device).clamp_min(1e-5)  # dead channels must not give 0 or inf
    w = weight.float().abs().amax(dim=0).clamp_min(1e-5)
    return (a.pow(alpha) / w.pow(1 - alpha)).clamp(1e-4, 1e4)


@functools.cache
def select_backend(device: torch.device, dtype: torch.dtype, rank: int) -> str:
    """'cuda' (INT4 tensor cores, sm_80/86/89), 'triton' (int8 MMA: sm_90, sm_12x, ...) or 'ref'."""
    if device.type != "cuda":
        return "ref"
    if dtype == torch.float16 and rank > 0 and rank % 16 == 0 and w4a4_cuda.is_supported(device):
        return "cuda"
    if HAS_TRITON and rank in (16, 32, 64, 128):
        return "triton"
    return "ref"


def _write_atomically(path: Path, data: bytes) -> None:
    atomic_write(path, lambda tmp: Path(tmp).write_bytes(data))  # a concurrent process sees all or nothing


def cubin_cache() -> w4a4_cuda.CubinCache:
    """Where the INT4 kernels compiled on this machine are kept for later runs: VoiceDesk's cache folder."""
    return w4a4_cuda.CubinCache(user_folders().cache / "kernels", _write_atomically)


def _split_low_rank(w_smooth: torch.Tensor, lora_down: torch.Tensor, lora_up: torch.Tensor) -> torch.Tensor:
    """Fill lora_down [K, R] and lora_up [N, R] with the top-R SVD of w_smooth [N, K] (zero columns past
    min(N, K)); return the residual w_smooth - lora_up lora_down^T, fp32, that the low-bit weights hold."""
    lora_down.zero_()
    lora_up.zero_()
    if lora_down.shape[1] > 0:
        u, s, vh = torch.linalg.svd(w_smooth, full_matrices=False)
        rank = min(lora_down.shape[1], s.numel())
        root = s[:rank].sqrt()  # split the singular values evenly so both factors suit fp16
        lora_down[:, :rank] = vh[:rank].t() * root  # [K, r]
        lora_up[:, :rank] = u[:, :rank] * root  # [N, r]
    # The residual is taken against the rounded factors, so it also absorbs their rounding.
    return w_smooth - lora_up.float() @ lora_down.float().t()


class _QuantizedLinear(nn.Module):
    """What the quantized linears share: the smoothing vector lambda `smooth` [K] fp32, the weight codes
    `qweight` and their fp32 scales `wscales`, an optional `bias` [N] in the model dtype."""

    rank = 0  # columns of the low-rank branch (none unless a subclass has one)

    def __init__(self, in_features: int, out_features: int, qweight: tuple[tuple[int, ...], torch.dtype],
                 wscales: tuple[int, ...], bias: bool, dtype: torch.dtype, device: torch.device | str | None):
        super().__init__()
        self.in_features, self.out_features = in_features, out_features
        make = functools.partial(torch.empty, device=device)
        self.register_buffer("smooth", make(in_features, dtype=torch.float32))
        self.register_buffer("qweight", make(*qweight[0], dtype=qweight[1]))
        self.register_buffer("wscales", make(*wscales, dtype=torch.float32))
        self.register_buffer("bias", make(out_features, dtype=dtype) if bias else None)

    def _quantize_weight(self, w_smooth: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The smoothed weight W diag(lambda) [N, K] fp32 -> (qweight, wscales); fills any low-rank factors."""
        raise NotImplementedError

    @classmethod
    @torch.no_grad()
    def from_linear(cls, linear: nn.Linear, act_amax: torch.Tensor, cfg: QuantConfig) -> _QuantizedLinear:
        """Convert `linear` given the max |x| of each input channel seen during calibration ([K]);
        each subclass has `empty_like(linear, cfg)`, the layer of the right sizes to fill."""
        layer = cls.empty_like(linear, cfg)
        smooth = smoothing_factors(act_amax, linear.weight, cfg.smooth_alpha)
        codes, scales = layer._quantize_weight(linear.weight.float() * smooth)
        layer.smooth.copy_(smooth)
        layer.qweight.copy_(codes)
        layer.wscales.copy_(scales)
        if linear.bias is not None:
            layer.bias.copy_(linear.bias)
        return layer

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, rank={self.rank}"


class W4A4Linear(_QuantizedLinear):
    """SVDQuant W4A4 linear: y = Q4(x / lambda) Q4(R)^T + (x / lambda) L1 L2 + b, R = W diag(lambda) - L1 L2.

    Buffers: `smooth` lambda [K] fp32, `qweight` [N, K/2] int8 (packed INT4, group-halves), `wscales`
    [N, K/64] fp32, `lora_down` L1 [K, R] and `lora_up` L2^T [N, R] in the model dtype, `bias` [N].
    """

    def __init__(self, in_features: int, out_features: int, rank: int, bias: bool,
                 dtype: torch.dtype = torch.float16, device: torch.device | str | None = None):
        if in_features % GROUP:
            raise ValueError(f"in_features = {in_features} is not a multiple of {GROUP}")
        super().__init__(in_features, out_features, ((out_features, in_features // 2), torch.int8),
                         (out_features, in_features // GROUP), bias, dtype, device)
        self.rank = rank
        self.backend: str | None = None  # None: chosen from the device; or force "ref" / "triton" / "cuda"
        self.register_buffer("lora_down", torch.empty(in_features, rank, dtype=dtype, device=device))
        self.register_buffer("lora_up", torch.empty(out_features, rank, dtype=dtype, device=device))
        self._codes, self._codes_key = None, None  # the Triton GEMM's copy of qweight, see _mma_weight_codes
        self._cubins: w4a4_cuda.CubinCache | None = None  # the CUDA GEMM's, looked up on its first call

    @classmethod
    def empty_like(cls, linear: nn.Linear, cfg: QuantConfig) -> W4A4Linear:
        return cls(linear.in_features, linear.out_features, cfg.rank, linear.bias is not None,
                   linear.weight.dtype, linear.weight.device)

    def _quantize_weight(self, w_smooth: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        codes, scales = quantize_groups_ref(_split_low_rank(w_smooth, self.lora_down, self.lora_up))
        return pack_int4(codes), scales

    def backend_name(self) -> str:
        """The backend forward() uses on this module's device: 'cuda', 'triton' or 'ref'."""
        return self.backend or select_backend(self.qweight.device, self.lora_up.dtype, self.rank)

    def backend_label(self) -> str:
        """'W4A4 INT4-MMA', 'W4A4 e4m3-MMA Triton', 'W4A4 int8-MMA Triton' or 'W4A4 PyTorch reference'."""
        backend = self.backend_name()
        if backend == "triton":
            from kernels.w4a4_triton import mma_layout

            return f"W4A4 {mma_layout(self.qweight.device)}-MMA Triton"
        return W4A4_LABELS[backend]

    def _mma_weight_codes(self, layout: str) -> torch.Tensor:
        """qweight one code per byte, as the Triton GEMM reads it: made on first use (during warm-up, before
        any CUDA graph capture) and again whenever qweight is replaced or changed; not in the state dict."""
        from kernels.w4a4_triton import weight_codes

        key = (self.qweight.data_ptr(), self.qweight._version, layout)
        if self._codes_key != key:
            self._codes, self._codes_key = weight_codes(self.qweight, layout), key
        return self._codes

    def forward(self, x: torch.Tensor, residual: torch.Tensor | None = None) -> torch.Tensor:
        backend = self.backend_name()
        if backend == "ref":
            return w4a4_linear_ref(x, self, residual)
        x2 = x.reshape(-1, self.in_features)  # [M, K]
        res2 = None if residual is None else residual.reshape(-1, self.out_features)
        if backend == "cuda":
            if HAS_TRITON:
                from kernels.w4a4_triton import quantize_act

                act = quantize_act(x2, self.smooth, self.lora_down, layout="packed")
            else:  # e.g. Windows without Triton: the same codes from plain PyTorch ops
                act = quantize_act_lowrank_ref(x2, self.smooth, self.lora_down)
            self._cubins = self._cubins or cubin_cache()
            y = w4a4_cuda.w4a4_gemm_cuda(act, self.qweight, self.wscales, self.lora_up, self.bias, res2,
                                         out_dtype=x.dtype, cache=self._cubins)
        else:
            from kernels.w4a4_triton import mma_layout, quantize_act, w4a4_gemm

            layout = mma_layout(x.device)
            act = quantize_act(x2, self.smooth, self.lora_down, layout=layout)
            y = w4a4_gemm(act, self._mma_weight_codes(layout), self.wscales, self.lora_up, self.bias, res2,
                          out_dtype=x.dtype)
        return y.reshape(*x.shape[:-1], self.out_features)


class W8A8Linear(_QuantizedLinear):
    """Smoothed W8A8 linear for layers INT4 activations garble: per-token int8 activations (scale =
    amax / 127) times per-output-channel int8 weights, int32 accumulation, fp32 rescale + bias
    (`kernels/int8_ref.py`). On CUDA GPUs with Triton, forward() is the Triton quantizer and int8 GEMM
    (`kernels/int8.py`, bit for bit the reference, graph-capturable), or the GEMM alone when the fused
    SwiGLU before it hands over its input already quantized (`int8_input_smooth`); elsewhere the reference.
    """

    def __init__(self, in_features: int, out_features: int, bias: bool,
                 dtype: torch.dtype = torch.float16, device: torch.device | str | None = None):
        super().__init__(in_features, out_features, ((out_features, in_features), torch.int8), (out_features,),
                         bias, dtype, device)
        self.backend: str | None = None  # None: chosen from the device; or force "ref" / "triton"

    @classmethod
    def empty_like(cls, linear: nn.Linear, cfg: QuantConfig) -> W8A8Linear:
        return cls(linear.in_features, linear.out_features, linear.bias is not None,
                   linear.weight.dtype, linear.weight.device)

    def _quantize_weight(self, w_smooth: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return quantize_rows_int8_ref(w_smooth)

    def backend_name(self) -> str:
        """'triton' (Triton int8 kernels, int8 tensor cores: sm_80+) or 'ref'."""
        if self.backend:
            return self.backend
        return "triton" if int8.int8_supported(self.qweight.device) else "ref"

    def backend_label(self) -> str:
        return INT8_LABELS[self.backend_name()]

    def int8_input_smooth(self) -> torch.Tensor | None:
        """`smooth` when forward() can take its input as `kernels.int8.Int8Rows`, quantized by the kernel that
        produced it (the fused SwiGLU); None when it needs the activation itself (the reference backend)."""
        return self.smooth if self.backend_name() == "triton" else None

    def forward(self, x: torch.Tensor | int8.Int8Rows) -> torch.Tensor:
        if not isinstance(x, int8.Int8Rows):  # else quantized upstream for us (see int8_input_smooth)
            if self.backend_name() == "ref":
                return int8_linear_ref(x, self.smooth, self.qweight, self.wscales, self.bias)
            x = int8.quantize_act_int8(x.reshape(-1, self.in_features), self.smooth)._replace(shape=x.shape)
        return int8.int8_rows_linear(x, self.qweight, self.wscales, self.bias)


class W8A8FP8Linear(_QuantizedLinear):
    """Smoothed W8A8 FP8 linear: y = Q8(x / lambda) Q8(R)^T + (x / lambda) L1 L2 + b, R = W diag(lambda) - L1 L2,
    with e4m3 codes, per-token dynamic activation scales and per-output-channel weight scales.

    Buffers: `smooth` lambda [K] fp32, `qweight` [N, K] float8_e4m3fn, `wscales` [N] fp32, `bias` [N], and
    with `rank` > 0 `lora_down` L1 [K, R] and `lora_up` L2^T [N, R] in the model dtype (else None). Not
    saved: `inv_smooth` = 1 / lambda [K] fp32, what the quantizers multiply by (the contract divides by
    nothing per element), made again whenever the layer is built or a state dict is loaded into it.
    On GPUs with FP8 tensor cores forward() is one Triton quantize kernel and one `torch._scaled_mm`
    (graph-capturable), or the `_scaled_mm` alone when the fused norm or SwiGLU before it hands over
    its output already quantized; with `product_out` the `_scaled_mm` has unit scales and the consumer
    applies them; elsewhere it is the fp32 reference (`kernels/fp8_ref.py`).
    """

    def __init__(self, in_features: int, out_features: int, rank: int, bias: bool,
                 dtype: torch.dtype = torch.float16, device: torch.device | str | None = None):
        if in_features % FP8_ALIGN or out_features % FP8_ALIGN:
            raise ValueError(f"FP8 linears need sizes that are multiples of {FP8_ALIGN}, "
                             f"got {in_features} -> {out_features}")
        super().__init__(in_features, out_features, ((out_features, in_features), FP8_DTYPE), (out_features,),
                         bias, dtype, device)
        self.rank = rank
        self.backend: str | None = None  # None: chosen from the device; or force "ref" / "scaled_mm"
        self.product_out = False  # set by the model where the kernel after me applies the scales (FP8Product)
        make = functools.partial(torch.empty, dtype=dtype, device=device)
        self.register_buffer("lora_down", make(in_features, rank) if rank else None)
        self.register_buffer("lora_up", make(out_features, rank) if rank else None)
        self.register_buffer("inv_smooth", torch.empty(in_features, dtype=torch.float32, device=device),
                             persistent=False)  # not in conversion files: they hold `smooth`, as they always did
        self.register_load_state_dict_post_hook(W8A8FP8Linear._reciprocals_after_load)

    @staticmethod
    def _reciprocals_after_load(layer: W8A8FP8Linear, incompatible_keys) -> None:
        layer.inv_smooth = ieee_reciprocal(layer.smooth)

    @classmethod
    @torch.no_grad()
    def from_linear(cls, linear: nn.Linear, act_amax: torch.Tensor, cfg: QuantConfig) -> W8A8FP8Linear:
        layer = super().from_linear(linear, act_amax, cfg)
        layer.inv_smooth = ieee_reciprocal(layer.smooth)
        return layer

    @classmethod
    def empty_like(cls, linear: nn.Linear, cfg: QuantConfig) -> W8A8FP8Linear:
        return cls(linear.in_features, linear.out_features, cfg.fp8_rank, linear.bias is not None,
                   linear.weight.dtype, linear.weight.device)

    def _quantize_weight(self, w_smooth: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        if self.rank:
            w_smooth = _split_low_rank(w_smooth, self.lora_down, self.lora_up)
        return quantize_rows_fp8_ref(w_smooth)

    def backend_name(self) -> str:
        """'scaled_mm' (Triton quantizer + torch._scaled_mm, FP8 tensor cores) or 'ref'."""
        if self.backend:
            return self.backend
        return "scaled_mm" if fp8.fp8_supported(self.qweight.device) else "ref"

    def backend_label(self) -> str:
        return FP8_LABELS[self.backend_name()]

    def fp8_input_inv_smooth(self) -> torch.Tensor | None:
        """`inv_smooth` when forward() can take its input as `kernels.fp8.FP8Rows`, quantized by the kernel
        that produced it (the fused norms and SwiGLU); None when it needs the activation itself (the
        reference backend, or the low-rank branch, which reads the unquantized input)."""
        return self.inv_smooth if self.backend_name() == "scaled_mm" and self.lora_down is None else None

    def can_return_product(self) -> bool:
        """True when forward() can hand its consumer the product before the scales (`product_out`,
        `kernels.fp8.FP8Product`): the `_scaled_mm` backend with nothing to add after the scales (no
        low-rank branch, no bias)."""
        return self.fp8_input_inv_smooth() is not None and self.bias is None

    def forward(self, x: torch.Tensor | fp8.FP8Rows) -> torch.Tensor | fp8.FP8Product:
        if not isinstance(x, fp8.FP8Rows):  # else quantized upstream for us (see fp8_input_inv_smooth)
            if self.backend_name() == "ref":
                return fp8_linear_ref(x, self)
            if self.lora_down is not None:  # off by default: plain torch ops are enough for an option
                return self._forward_low_rank(x)
            x = fp8.FP8Rows(*fp8.quantize_act_fp8(x.reshape(-1, self.in_features), self.inv_smooth), x.shape,
                            x.dtype)
        if self.product_out:
            return fp8.fp8_rows_product(x, self.qweight, self.wscales)
        return fp8.fp8_rows_linear(x, self.qweight, self.wscales, self.bias)

    def _forward_low_rank(self, x: torch.Tensor) -> torch.Tensor:
        x2 = x.reshape(-1, self.in_features)  # [M, K]
        y = fp8.fp8_linear(x2, self.inv_smooth, self.qweight, self.wscales, self.bias)  # [M, N]
        xs = smoothed_rows(x2, self.inv_smooth)  # [M, K]
        y += ((xs @ self.lora_down.float()) @ self.lora_up.float().t()).to(y.dtype)
        return y.reshape(*x.shape[:-1], self.out_features)


QUANTIZED_LINEARS = {"w4a4": W4A4Linear, "w8a8": W8A8Linear, "fp8": W8A8FP8Linear}
