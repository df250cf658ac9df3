"""The scoring step of OmniVoice's unmasking loop, fused: guided log-probabilities, best class, score.

Per codebook c and frame t, in fp32 (logits of any float dtype are upcast first, as upstream does):

    cond_lp = log_softmax(cond), uncond_lp = log_softmax(uncond)
    lp      = log_softmax(cond_lp + g * (cond_lp - uncond_lp))     (lp = cond_lp when g == 0)
    lp[mask_id] = -inf
    token   = argmax(lp)                                           (the first one on ties)
    score   = max(lp) - c * layer_penalty

One program per (frame, codebook) keeps the row in registers, so the three [C, T, V] fp32
intermediates PyTorch writes and reads back never exist. Gumbel noise, the already-decoded mask and
top-k stay with the caller; so does the class_temperature > 0 path, which needs all of `lp`.
"""
import torch

from kernels._launch import FLOAT_DTYPES, check, device_of, num_warps, on_device, output
from kernels._triton import exp_f32, log_f32, tl, triton


@triton.jit
def _log_softmax(x, valid):
    """log_softmax over the valid lanes of an fp32 row; padding lanes come out finite and meaningless."""
    shifted = x - tl.max(tl.where(valid, x, float("-inf")), axis=0)
    return shifted - log_f32(tl.sum(tl.where(valid, exp_f32(shifted), 0.0), axis=0))


@triton.jit
def _cfg_score_kernel(
    cond_ptr,  # [C, T, V] logits, V contiguous
    uncond_ptr,  # [C, T, V] (only read when HAS_GUIDANCE)
    token_ptr,  # [C, T] int64
    score_ptr,  # [C, T] fp32
    stride_cond_book,  # how far to move the pointer to go one codebook / one frame further, per tensor
    stride_cond_frame,
    stride_uncond_book,
    stride_uncond_frame,
    stride_token_book,
    stride_token_frame,
    stride_score_book,
    stride_score_frame,
    guidance_scale,
    layer_penalty,
    mask_id,
    N_CLASSES: tl.constexpr,  # a constant: the lanes past it, whole registers of the padding, fold away
    HAS_GUIDANCE: tl.constexpr,
    BLOCK_V: tl.constexpr,
):
    frame = tl.program_id(0).to(tl.int64)
    book = tl.program_id(1).to(tl.int64)
    classes = tl.arange(0, BLOCK_V)
    valid = classes < N_CLASSES
    cond = tl.load(cond_ptr + book * stride_cond_book + frame * stride_cond_frame + classes, mask=valid, other=0.0)
    lp = _log_softmax(cond.to(tl.float32), valid)
    if HAS_GUIDANCE:
        uncond = tl.load(uncond_ptr + book * stride_uncond_book + frame * stride_uncond_frame + classes,
                         mask=valid, other=0.0)
        uncond_lp = _log_softmax(uncond.to(tl.float32), valid)
        lp = _log_softmax(lp + guidance_scale * (lp - uncond_lp), valid)
    lp = tl.where(valid & (classes != mask_id), lp, float("-inf"))
    best, token = tl.max(lp, axis=0, return_indices=True, return_indices_tie_break_left=True)
    tl.store(token_ptr + book * stride_token_book + frame * stride_token_frame, token.to(tl.int64))
    score = best - book.to(tl.float32) * layer_penalty
    tl.store(score_ptr + book * stride_score_book + frame * stride_score_frame, score)


def cfg_score(cond: torch.Tensor, uncond: torch.Tensor | None, guidance_scale: float, layer_penalty: float,
              mask_id: int, *, out: tuple[torch.Tensor, torch.Tensor] | None = None,
              ) -> tuple[torch.Tensor, torch.Tensor]:
    """Classifier-free-guided best class and confidence score for every (codebook, frame) slot.

    Parameters
    ----------
    cond, uncond : torch.Tensor
        [C, T, V] logits of the conditional and unconditional rows, fp16, bf16 or fp32, the class
        dimension contiguous (any codebook and frame strides, so slices of a bigger batch work).
        `uncond` may be None when `guidance_scale` is 0.
    guidance_scale : float
        g in `cond_lp + g * (cond_lp - uncond_lp)`; 0 means no guidance.
    layer_penalty : float
        Subtracted from the score once per codebook index.
    mask_id : int
        Class that can never be chosen (the MASK token).
    out : tuple of two torch.Tensor, optional
        `(tokens, scores)` buffers: [C, T] int64 and [C, T] fp32.

    Returns
    -------
    tokens : torch.Tensor
        [C, T] int64, argmax of the guided log-probabilities (first on ties).
    scores : torch.Tensor
        [C, T] fp32, their maximum minus `codebook * layer_penalty`.
    """
    n_books, n_frames, n_classes = cond.shape
    if not 0 <= mask_id < n_classes:
        raise ValueError(f"mask_id {mask_id} is not a class of {n_classes}")
    check("cond", cond, (n_books, n_frames, n_classes), FLOAT_DTYPES)
    has_guidance = guidance_scale != 0
    if has_guidance:
        if uncond is None:
            raise ValueError("uncond logits are needed when guidance_scale is not 0")
        check("uncond", uncond, cond.shape, FLOAT_DTYPES)
        device = device_of(cond, uncond)
    else:
        uncond = cond  # never read
        device = device_of(cond)
    tokens_out, scores_out = out if out is not None else (None, None)
    tokens = output("tokens out", tokens_out, (n_books, n_frames), torch.int64, device)
    scores = output("scores out", scores_out, (n_books, n_frames), torch.float32, device)
    block = triton.next_power_of_2(n_classes)
    with on_device(device):
        _cfg_score_kernel[(n_frames, n_books)](
            cond, uncond, tokens, scores,
            cond.stride(0), cond.stride(1), uncond.stride(0), uncond.stride(1),
            tokens.stride(0), tokens.stride(1), scores.stride(0), scores.stride(1),
            guidance_scale, layer_penalty, mask_id,
            N_CLASSES=n_classes, HAS_GUIDANCE=has_guidance, BLOCK_V=block,
            num_warps=num_warps(block), enable_fp_fusion=False,
        )
    return tokens, scores


def cfg_score_ref(cond: torch.Tensor, uncond: torch.Tensor | None, guidance_scale: float, layer_penalty: float,
                  mask_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Plain-PyTorch `cfg_score`, operation for operation as upstream OmniVoice scores one item."""
    lp = torch.log_softmax(cond.float(), dim=-1)  # [C, T, V]
    if guidance_scale != 0:
        uncond_lp = torch.log_softmax(uncond.float(), dim=-1)
        lp = torch.log_softmax(lp + guidance_scale * (lp - uncond_lp), dim=-1)
    lp[..., mask_id] = float("-inf")
    codebook = torch.arange(cond.shape[0], device=cond.device).view(-1, 1)  # [C, 1]
    return lp.argmax(dim=-1), lp.max(dim=-1).values - codebook * layer_penalty
