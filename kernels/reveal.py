"""The reveal half of one unmasking step on the packed layout, fused: position noise, the masks, each
sequence's rank of every slot, and the write-back of the revealed tokens. Two kernels in place of the
~80 small PyTorch ops (a counter hash in 16-bit halves, Gumbel noise, two argsorts, scatters, index
copies) that each took a launch per step.

On slots (c, t) of a [C, H] grid, t being a column of the packed target slots of all sequences:

    u      = uniform of lowbias32(lowbias32(key[t] ^ ((step * C + c) * max_frames + frame[t])))
    noisy  = score / temperature - log(-log(u + 1e-10) + 1e-10)       (score itself at temperature 0)
    noisy  = -inf where tokens != mask_id or not valid
    rank   = slots of the same sequence ahead of (c, t): a higher noisy score, or an equal one earlier
             in the flat codebook-major order (the place a stable descending sort gives it)
    tokens = predicted where rank < schedule[step, sequence], else unchanged; both copies of the
             token in ids (its cond and its uncond column) follow

in fp32, as `engine.lm.noise` and `engine.lm.runner` do in PyTorch (tests/kernels/test_reveal.py holds
the kernels to them: the hash and uniforms bit for bit, the noise to the log's rounding, the reveal exactly).
"""
import torch

from kernels._launch import check, device_of, on_device
from kernels._triton import HAS_TRITON, log_f32, tl, triton

# lowbias32's multipliers (engine/lm/noise.py: mix32)
_MIX_1, _MIX_2 = (tl.constexpr(0x7FEB352D), tl.constexpr(0x846CA68B)) if HAS_TRITON else (None, None)
_BLOCK = 64  # slots per program of the noise
_BLOCK_RANK = 16  # slots per program of the rank: its loop is latency-bound, so many small programs
_BLOCK_OTHERS = 128  # slots compared per loop iteration of the rank


@triton.jit
def _mix32(x):
    """lowbias32 of uint32 x (products wrap mod 2**32, as noise.mix32's 16-bit halves do)."""
    x = x ^ (x >> 16)
    x = x * _MIX_1
    x = x ^ (x >> 15)
    x = x * _MIX_2
    return x ^ (x >> 16)


@triton.jit
def _noisy_scores_kernel(score_ptr, token_ptr, valid_ptr, key_ptr, frame_ptr, step_ptr, noisy_ptr,
                         H, n_books, max_frames, temperature, mask_id,
                         HAS_NOISE: tl.constexpr, BLOCK: tl.constexpr):
    book = tl.program_id(1).to(tl.int64)
    t = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    ok = t < H
    at = book * H + t
    score = tl.load(score_ptr + at, mask=ok, other=0.0)
    if HAS_NOISE:
        step = tl.load(step_ptr)
        counter = (step * n_books + book) * max_frames + tl.load(frame_ptr + t, mask=ok, other=0)
        key = tl.load(key_ptr + t, mask=ok, other=0)
        bits = _mix32(_mix32((key ^ counter).to(tl.uint32)))
        u = (bits >> 8).to(tl.float32) * (1.0 / (1 << 24))
        gumbel = log_f32(-log_f32(u + 1e-10) + 1e-10)
        score = tl.math.div_rn(score, tl.full((BLOCK,), 0.0, tl.float32) + temperature) - gumbel
    masked = tl.load(token_ptr + at, mask=ok, other=mask_id) != mask_id
    valid = tl.load(valid_ptr + at, mask=ok, other=0) != 0
    tl.store(noisy_ptr + at, tl.where(masked | ~valid, float("-inf"), score), mask=ok)


@triton.jit
def _reveal_kernel(noisy_ptr, predicted_ptr, token_ptr, ids_ptr, cond_col_ptr, uncond_col_ptr, sequence_ptr,
                   rank_base_ptr, end_ptr, schedule_ptr, step_ptr, H, n_books, stride_ids_book, stride_schedule,
                   BLOCK: tl.constexpr, BLOCK_OTHERS: tl.constexpr):
    book = tl.program_id(1)
    t = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    ok = t < H
    score = tl.load(noisy_ptr + book * H + t, mask=ok, other=0.0)  # C * H < 2**31: int32 indices
    sequence = tl.load(sequence_ptr + t, mask=ok, other=-1).to(tl.int32)
    # the sequences of this block's slots span the slots lo..hi (junk slots: an empty span)
    lo = tl.min(tl.load(rank_base_ptr + t, mask=ok, other=n_books * H).to(tl.int32) // n_books, axis=0)
    hi = tl.max(tl.load(end_ptr + t, mask=ok, other=0).to(tl.int32), axis=0)
    rank = tl.zeros((BLOCK,), tl.int32)
    for other_book in range(n_books):
        for j0 in range(lo, hi, BLOCK_OTHERS):
            j = j0 + tl.arange(0, BLOCK_OTHERS)
            j_ok = j < hi
            other = tl.load(noisy_ptr + other_book * H + j, mask=j_ok, other=0.0)
            others = tl.load(sequence_ptr + j, mask=j_ok, other=-2).to(tl.int32)
            same = (others[None, :] == sequence[:, None]) & j_ok[None, :]
            earlier = (other_book < book) | ((other_book == book) & (j[None, :] < t[:, None]))
            ahead = (other[None, :] > score[:, None]) | ((other[None, :] == score[:, None]) & earlier)
            rank += tl.sum((same & ahead).to(tl.int32), axis=1)
    step = tl.load(step_ptr)
    quota = tl.load(schedule_ptr + step * stride_schedule + sequence, mask=ok, other=0)
    at = book.to(tl.int64) * H + t
    token = tl.load(token_ptr + at, mask=ok, other=0)
    token = tl.where(rank < quota, tl.load(predicted_ptr + at, mask=ok, other=0), token)
    tl.store(token_ptr + at, token, mask=ok)
    row = ids_ptr + book.to(tl.int64) * stride_ids_book
    tl.store(row + tl.load(cond_col_ptr + t, mask=ok, other=0), token, mask=ok)
    tl.store(row + tl.load(uncond_col_ptr + t, mask=ok, other=0), token, mask=ok)


def noisy_scores(scores: torch.Tensor, tokens: torch.Tensor, valid: torch.Tensor, *, slot_key: torch.Tensor,
                 slot_frame: torch.Tensor, step: torch.Tensor, temperature: float, mask_id: int,
                 max_frames: int) -> torch.Tensor:
    """[C, H] fp32 reveal priorities: `scores` with the slots' position noise at `temperature` (none at 0),
    -inf where a token is revealed already or the slot is no sequence's.

    scores [C, H] fp32, tokens [C, H] int64, valid [C, H] bool, all contiguous; slot_key and slot_frame
    [H] int64 (each slot's noise key and its frame in its sequence); step [] int64, read on the device.
    """
    C, H = scores.shape
    device = device_of(scores, tokens, valid, slot_key, slot_frame, step)
    _check_grid(C, H, scores=(scores, torch.float32), tokens=(tokens, torch.int64), valid=(valid, torch.bool))
    _check_slots(H, slot_key=slot_key, slot_frame=slot_frame)
    noisy = torch.empty_like(scores)
    with on_device(device):
        _noisy_scores_kernel[(triton.cdiv(H, _BLOCK), C)](
            scores, tokens, valid, slot_key, slot_frame, step, noisy, H, C, max_frames, temperature, mask_id,
            HAS_NOISE=temperature > 0, BLOCK=_BLOCK, num_warps=2, enable_fp_fusion=False)
    return noisy


def reveal(noisy: torch.Tensor, predicted: torch.Tensor, *, tokens: torch.Tensor, ids: torch.Tensor,
           cond_cols: torch.Tensor, uncond_cols: torch.Tensor, slot_sequence: torch.Tensor, rank_base: torch.Tensor,
           slot_end: torch.Tensor, schedule: torch.Tensor, step: torch.Tensor) -> None:
    """Reveal, in each sequence, its scheduled number of its slots of highest `noisy` priority (in place).

    Parameters
    ----------
    noisy, predicted : torch.Tensor
        [C, H] fp32 priorities (`noisy_scores`) and int64 best class of every slot, contiguous.
    tokens : torch.Tensor
        [C, H] int64 current tokens, updated: predicted where revealed.
    ids : torch.Tensor
        [C, S] int64 model input (a view of the batch's ids), whose columns cond_cols[t] and
        uncond_cols[t] get slot t's token.
    cond_cols, uncond_cols, slot_sequence, rank_base, slot_end : torch.Tensor
        [H] int64: slot t's two columns in ids, its sequence (junk slots: a column of `schedule` that
        reveals nothing), C times the first slot of that sequence, and the slot past its last (junk
        slots: their own first slot, so that they rank nothing).
    schedule : torch.Tensor
        [steps, sequences] int64: slots each sequence reveals at each step, read at row `step` ([] int64).
    """
    C, H = noisy.shape
    device = device_of(noisy, predicted, tokens, ids, schedule, step)
    _check_grid(C, H, noisy=(noisy, torch.float32), predicted=(predicted, torch.int64),
                tokens=(tokens, torch.int64))
    _check_slots(H, cond_cols=cond_cols, uncond_cols=uncond_cols, slot_sequence=slot_sequence,
                 rank_base=rank_base, slot_end=slot_end)
    check("ids", ids, (C, ids.shape[1]), (torch.int64,))
    check("schedule", schedule, tuple(schedule.shape), (torch.int64,))
    with on_device(device):
        _reveal_kernel[(triton.cdiv(H, _BLOCK_RANK), C)](
            noisy, predicted, tokens, ids, cond_cols, uncond_cols, slot_sequence, rank_base, slot_end, schedule,
            step, H, C, ids.stride(0), schedule.stride(0), BLOCK=_BLOCK_RANK, BLOCK_OTHERS=_BLOCK_OTHERS, num_warps=4)


def _check_grid(C: int, H: int, **tensors: tuple[torch.Tensor, torch.dtype]) -> None:
    for name, (t, dtype) in tensors.items():
        check(name, t, (C, H), (dtype,))
        if not t.is_contiguous():
            raise ValueError(f"{name} must be contiguous")


def _check_slots(H: int, **tensors: torch.Tensor) -> None:
    for name, t in tensors.items():
        check(name, t, (H,), (torch.int64,))
