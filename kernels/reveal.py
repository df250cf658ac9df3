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

The reveal sorts nothing and ranks no slot: one program per sequence finds the key at place `quota` of its
descending order (slots as uint32 keys that order as the priorities do) a digit at a time, 3 bits a pass over
its slots (11 passes), each counting the slots of every digit among those that share the bits found so far; when
that key is tied past the quota, the same on the tied slots' flat indices (`_FLAT_BITS` bits, 3 a pass) finds the
last one revealed; then it reveals the slots ahead of it. Its latency grows with a sequence's frames, not with the
sequences in a batch.

in fp32, as `engine.lm.noise` and `engine.lm.runner` do in PyTorch (tests/kernels/test_reveal.py holds
the kernels to them: the hash and uniforms bit for bit, the noise to the log's rounding, the reveal exactly).
"""
import torch

from kernels._launch import check, device_of, on_device
from kernels._triton import HAS_TRITON, log_f32, tl, triton

# lowbias32's multipliers (engine/lm/noise.py: mix32)
_MIX_1, _MIX_2 = (tl.constexpr(0x7FEB352D), tl.constexpr(0x846CA68B)) if HAS_TRITON else (None, None)
_BLOCK = 64  # slots per program of the noise
_BLOCK_T = 512  # most frames of a sequence per tile of the reveal (all codebooks): one tile up to 20 s of audio
# The flat keys, which break ties, hold a slot's flat index in its sequence in _FLAT_BITS bits (`reveal` refuses
# sequences of more slots). The kernels read them as constexpr: their mask, and the passes that find one 3-bit digit
# each (`_tile_digits`) from the top, the first pass the bits left over.
_FLAT_BITS = 18
_FLAT_MASK, _FLAT_PASSES = ((tl.constexpr((1 << _FLAT_BITS) - 1), tl.constexpr((_FLAT_BITS + 2) // 3)) if HAS_TRITON
                            else (None, None))


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
def _tile(noisy_ptr, t0, end, H, n_books, BOOKS: tl.constexpr, BLOCK_T: tl.constexpr):
    """The [BOOKS, BLOCK_T] tile of a sequence's slots at frames t0..: their order keys (uint32 that order as
    the priorities do, -0.0 as +0.0) and which are its slots."""
    book = tl.arange(0, BOOKS)[:, None]
    t = t0 + tl.arange(0, BLOCK_T)[None, :]
    ok = (book < n_books) & (t < end)
    x = tl.load(noisy_ptr + book * H + t, mask=ok, other=0.0)
    bits = tl.where(x == 0.0, 0.0, x).to(tl.int32, bitcast=True)
    key = (bits ^ ((bits >> 31) | -2147483648)).to(tl.uint32, bitcast=True)  # negative: ~bits, else sign set
    return key, ok


@triton.jit
def _tile_digits(key, ok, prefix, shift):
    """[8] int32: how many of a tile's slots whose key has `prefix`'s bits above bit shift + 3 have each 3-bit digit
    (key >> shift) & 7 there. Each slot adds 1 << 4 * digit to its frame's sum over codebooks (4-bit fields:
    `reveal` checks that fewer than 16 codebooks fit), whose fields are then summed over frames."""
    digit = (key >> shift) - (prefix >> shift)  # prefix's bits below shift + 3 are 0
    in_digit = ok & (digit < 8)  # unsigned: below `prefix >> shift`, it wraps past 8
    fields = tl.sum(in_digit.to(tl.uint32) << (4 * (digit & 7)), axis=0)  # [BLOCK_T]; shifts below 32
    bins = tl.arange(0, 8)
    return tl.sum((fields[None, :] >> (4 * bins[:, None])) & 15, axis=1).to(tl.int32)


@triton.jit
def _flat_keys(key, ok, t0, start, end, top, BOOKS: tl.constexpr, BLOCK_T: tl.constexpr):
    """Keys that order a tile's slots tied at order key `top` as their flat codebook-major index in the sequence
    does, the first highest (the index's _FLAT_BITS bits flipped, _FLAT_MASK - index: `reveal` checks that the index
    fits), and which are tied."""
    book = tl.arange(0, BOOKS)[:, None]
    t = t0 + tl.arange(0, BLOCK_T)[None, :]
    flat = book * (end - start) + (t - start)
    return (-flat + _FLAT_MASK).to(tl.uint32), ok & (key == top)


@triton.jit
def _digits(key, ok, noisy_ptr, start, end, H, n_books, top, prefix, shift, BY_FLAT: tl.constexpr,
            BOOKS: tl.constexpr, BLOCK_T: tl.constexpr):
    """The digit counts of `_tile_digits` over the sequence, of the order keys or (BY_FLAT) of the flat keys of
    the slots tied at order key `top`: its first tile given (key, ok), the rest loaded."""
    counts = _tile_digits(key, ok, prefix, shift)
    for t0 in range(start + BLOCK_T, end, BLOCK_T):
        more_key, more_ok = _tile(noisy_ptr, t0, end, H, n_books, BOOKS, BLOCK_T)
        if BY_FLAT:
            more_key, more_ok = _flat_keys(more_key, more_ok, t0, start, end, top, BOOKS, BLOCK_T)
        counts += _tile_digits(more_key, more_ok, prefix, shift)
    return counts


@triton.jit
def _next_digit(counts, need, prefix, shift):
    """From a pass's digit counts: the highest digit with at least `need` keys at or above it, the prefix with it,
    `need` less those above it, and how many keys have that prefix."""
    bins = tl.arange(0, 8)
    at_or_above = tl.cumsum(counts, axis=0, reverse=True)  # [8]: at digit 0, all of them (>= need)
    digit = tl.sum(((at_or_above >= need) & (bins > 0)).to(tl.int32), axis=0)
    need -= tl.sum(tl.where(bins == digit + 1, at_or_above, 0), axis=0)  # those above the digit are taken
    return prefix | (digit.to(tl.uint32) << shift), need, tl.sum(tl.where(bins == digit, counts, 0), axis=0)


@triton.jit
def _write(key, ok, t0, top, last, reveals, start, predicted_ptr, token_ptr, ids_ptr, cond_col_ptr, uncond_col_ptr,
           end, H, stride_ids_book, BOOKS: tl.constexpr, BLOCK_T: tl.constexpr):
    """Reveal, if `reveals`, a tile's slots above order key `top` and those at it of flat key `last` or above;
    write each token of the tile to its two ids columns."""
    book = tl.arange(0, BOOKS)[:, None]
    t = t0 + tl.arange(0, BLOCK_T)[None, :]
    at = book * H + t
    flat_key, tied = _flat_keys(key, ok, t0, start, end, top, BOOKS, BLOCK_T)
    chosen = ok & ((key > top) | (tied & (flat_key >= last))) & reveals
    token = tl.load(token_ptr + at, mask=ok, other=0)
    token = tl.where(chosen, tl.load(predicted_ptr + at, mask=ok, other=0), token)
    tl.store(token_ptr + at, token, mask=ok)
    row = ids_ptr + book.to(tl.int64) * stride_ids_book
    tl.store(row + tl.load(cond_col_ptr + t, mask=t < end, other=0), token, mask=ok)
    tl.store(row + tl.load(uncond_col_ptr + t, mask=t < end, other=0), token, mask=ok)


@triton.jit
def _reveal_kernel(noisy_ptr, predicted_ptr, token_ptr, ids_ptr, cond_col_ptr, uncond_col_ptr, sequence_slots_ptr,
                   schedule_ptr, step_ptr, H, n_books, stride_ids_book, stride_schedule,
                   BOOKS: tl.constexpr, BLOCK_T: tl.constexpr):
    """One program per sequence: the order key at place `quota` of the sequence's descending order, then, when
    not all the slots tied at it are revealed, the flat key of the last one revealed, each found 3 bits a pass
    from digit counts; the slots up to it revealed."""
    sequence = tl.program_id(0)
    start = tl.load(sequence_slots_ptr + sequence).to(tl.int32)
    end = tl.load(sequence_slots_ptr + sequence + 1).to(tl.int32)
    step = tl.load(step_ptr)
    quota = tl.load(schedule_ptr + step * stride_schedule + sequence).to(tl.int32)
    quota = tl.minimum(quota, n_books * (end - start))  # past all: all
    key, ok = _tile(noisy_ptr, start, end, H, n_books, BOOKS, BLOCK_T)  # kept: most sequences fit
    # the quota-th highest order key, 3 bits a pass (2 in the first): among the slots that share the bits found so
    # far, the highest digit with at least `need` of them at or above it (none at quota 0: the junk slots' program
    # would be the longest)
    top = tl.full((), 0, tl.uint32)
    need = quota  # slots still to take among those of prefix `top`: at the end, of order key `top`
    # after each pass, how many slots have prefix `top` (at the end, order key `top`); left at `need` when no pass
    # runs (quota 0), so that no tie is broken
    tied = need
    for i in range(tl.where(quota > 0, 11, 0)):
        counts = _digits(key, ok, noisy_ptr, start, end, H, n_books, top, top, 30 - 3 * i, False, BOOKS, BLOCK_T)
        top, need, tied = _next_digit(counts, need, top, 30 - 3 * i)
    # of the slots tied at it, the `need` first in flat order: the need-th highest flat key, 3 bits a pass from the
    # top of its _FLAT_BITS; none when all are taken
    flat_key, tie = _flat_keys(key, ok, start, start, end, top, BOOKS, BLOCK_T)
    last = tl.full((), 0, tl.uint32)
    for i in range(tl.where(need < tied, _FLAT_PASSES, 0)):
        shift = 3 * (_FLAT_PASSES - 1) - 3 * i
        counts = _digits(flat_key, tie, noisy_ptr, start, end, H, n_books, top, last, shift, True, BOOKS, BLOCK_T)
        last, need, _ = _next_digit(counts, need, last, shift)
    _write(key, ok, start, top, last, quota > 0, start, predicted_ptr, token_ptr, ids_ptr, cond_col_ptr,
           uncond_col_ptr, end, H, stride_ids_book, BOOKS, BLOCK_T)
    for t0 in range(start + BLOCK_T, end, BLOCK_T):
        key, ok = _tile(noisy_ptr, t0, end, H, n_books, BOOKS, BLOCK_T)
        _write(key, ok, t0, top, last, quota > 0, start, predicted_ptr, token_ptr, ids_ptr, cond_col_ptr,
               uncond_col_ptr, end, H, stride_ids_book, BOOKS, BLOCK_T)


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
           cond_cols: torch.Tensor, uncond_cols: torch.Tensor, sequence_slots: torch.Tensor, schedule: torch.Tensor,
           step: torch.Tensor) -> None:
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
    cond_cols, uncond_cols : torch.Tensor
        [H] int64: slot t's two columns in ids.
    sequence_slots : torch.Tensor
        [J + 1] int64: sequence j's slots are sequence_slots[j] up to sequence_slots[j + 1] (each sequence
        is one program; give the slots of no sequence a column of `schedule` that reveals nothing).
    schedule : torch.Tensor
        [steps, J] int64: slots each sequence reveals at each step, read at row `step` ([] int64).
    """
    C, H = noisy.shape
    device = device_of(noisy, predicted, tokens, ids, cond_cols, uncond_cols, sequence_slots, schedule, step)
    _check_grid(C, H, noisy=(noisy, torch.float32), predicted=(predicted, torch.int64),
                tokens=(tokens, torch.int64))
    _check_slots(H, cond_cols=cond_cols, uncond_cols=uncond_cols)
    J = schedule.shape[1]
    check("sequence_slots", sequence_slots, (J + 1,), (torch.int64,))
    check("ids", ids, (C, ids.shape[1]), (torch.int64,))
    check("schedule", schedule, tuple(schedule.shape), (torch.int64,))
    if C >= 16 or C * H > 1 << _FLAT_BITS:
        raise ValueError(f"{C} x {H} slots: the reveal counts a frame's slots in 4-bit fields, indexes them in "
                         f"{_FLAT_BITS} bits")
    with on_device(device):
        _reveal_kernel[(J,)](noisy, predicted, tokens, ids, cond_cols, uncond_cols, sequence_slots, schedule, step,
                             H, C, ids.stride(0), schedule.stride(0), BOOKS=triton.next_power_of_2(C),
                             BLOCK_T=min(triton.next_power_of_2(H), _BLOCK_T), num_warps=8)


def _check_grid(C: int, H: int, **tensors: tuple[torch.Tensor, torch.dtype]) -> None:
    for name, (t, dtype) in tensors.items():
        check(name, t, (C, H), (dtype,))
        if not t.is_contiguous():
            raise ValueError(f"{name} must be contiguous")


def _check_slots(H: int, **tensors: torch.Tensor) -> None:
    for name, t in tensors.items():
        check(name, t, (H,), (torch.int64,))
