"""OmniVoice's input embedding in one pass: each row is the sum of its codebooks' audio embeddings (an audio row)
or its text token's embedding (a text row).

Replaces the eight launches of the PyTorch form (`embed_ref`: arange, two integer ops, the [B, C, S, H] gather,
its sum over codebooks, the text gather, the select), three of which write or read C copies of the activations.
Numerics are PyTorch's: the codebook sum in fp32 (the accumulator CUDA's and the CPU's sum use for 16-bit inputs),
rounded once to the table's dtype; a text row is copied. Summed in codebook order here, in the reduction's own order
there: the fp32 sums may differ in their last bit, the rounded rows only where such a sum sits at a rounding tie.
"""
import torch

from kernels._launch import FLOAT_DTYPES, check, device_of, num_warps, on_device, output
from kernels._triton import tl, triton

_MAX_BLOCK = 1024  # hidden columns per program (the LM's whole row: 8 fp16 a thread, 16-byte loads)


@triton.jit
def _embed_kernel(
    ids_ptr,  # [B, C, S] token ids (any strides)
    audio_mask_ptr,  # [B, S] bool: an audio row (any strides)
    audio_table_ptr,  # [C * n_classes, H]: codebook c's class k at row c * n_classes + k
    text_table_ptr,  # [vocab, H]
    out_ptr,  # [B, S, H]
    stride_ids_batch,  # how far to move the pointer to go one batch item / codebook / row further, per tensor
    stride_ids_book,
    stride_ids_row,
    stride_mask_batch,
    stride_mask_row,
    stride_audio_table,
    stride_text_table,
    stride_out_batch,
    stride_out_row,
    n_classes,
    hidden,
    BOOKS: tl.constexpr,
    BLOCK_H: tl.constexpr,
):
    row = tl.program_id(0).to(tl.int64)
    item = tl.program_id(1).to(tl.int64)
    cols = tl.program_id(2) * BLOCK_H + tl.arange(0, BLOCK_H)
    ids = ids_ptr + item * stride_ids_batch + row * stride_ids_row
    audio_row = tl.load(audio_mask_ptr + item * stride_mask_batch + row * stride_mask_row).to(tl.int32)  # 1 or 0
    is_audio = audio_row != 0
    audio_cols = cols < hidden * audio_row  # the row's columns where it is an audio row, none where it is not
    text_cols = cols < hidden * (1 - audio_row)
    audio = tl.zeros((BLOCK_H,), tl.float32)
    for book in tl.static_range(BOOKS):  # a text row loads nothing here
        token = tl.load(ids + book * stride_ids_book, mask=is_audio, other=0).to(tl.int64)
        table_row = audio_table_ptr + (book * n_classes + token) * stride_audio_table
        audio += tl.load(table_row + cols, mask=audio_cols, other=0.0).to(tl.float32)
    text_token = tl.load(ids, mask=audio_row == 0, other=0).to(tl.int64)  # codebook 0 holds the text ids
    text = tl.load(text_table_ptr + text_token * stride_text_table + cols, mask=text_cols, other=0.0)
    dtype = out_ptr.dtype.element_ty
    x = tl.where(is_audio, audio.to(dtype), text.to(dtype))
    tl.store(out_ptr + item * stride_out_batch + row * stride_out_row + cols, x, mask=cols < hidden)


def embed(input_ids: torch.Tensor, audio_mask: torch.Tensor, audio_table: torch.Tensor, text_table: torch.Tensor, *,
          out: torch.Tensor | None = None) -> torch.Tensor:
    """Audio rows: the sum over codebooks c of `audio_table[c * n_classes + input_ids[b, c, s]]`; text rows:
    `text_table[input_ids[b, 0, s]]`.

    Parameters
    ----------
    input_ids : torch.Tensor
        [B, C, S] int64 or int32 (any strides): an audio row's class per codebook, a text row's token in codebook 0.
        Ids are not range-checked (that would wait for the device): audio classes must be < n_classes, text tokens
        < vocab.
    audio_mask : torch.Tensor
        [B, S] bool (any strides): True for an audio row.
    audio_table : torch.Tensor
        [C * n_classes, H] fp16, bf16 or fp32, last dimension contiguous: the codebooks' embeddings, codebook-major.
    text_table : torch.Tensor
        [vocab, H], dtype of `audio_table`, last dimension contiguous.
    out : torch.Tensor, optional
        [B, S, H] buffer to write into (last dimension contiguous).

    Returns
    -------
    torch.Tensor
        [B, S, H] in the tables' dtype: an audio row's sum taken in fp32 and rounded once.
    """
    B, C, S = input_ids.shape
    audio_rows, hidden = audio_table.shape
    if audio_rows % C:
        raise ValueError(f"audio_table has {audio_rows} rows, not a whole number of classes for {C} codebooks")
    if input_ids.dtype not in (torch.int64, torch.int32):
        raise ValueError(f"input_ids: expected int64 or int32, got {input_ids.dtype}")
    check("audio_mask", audio_mask[..., None], (B, S, 1), (torch.bool,))  # as a column: any strides
    check("audio_table", audio_table, (audio_rows, hidden), FLOAT_DTYPES)
    check("text_table", text_table, (text_table.shape[0], hidden), (audio_table.dtype,))
    device = device_of(input_ids, audio_mask, audio_table, text_table)
    x = output("out", out, (B, S, hidden), audio_table.dtype, device)
    block = min(triton.next_power_of_2(hidden), _MAX_BLOCK)
    with on_device(device):
        _embed_kernel[(S, B, triton.cdiv(hidden, block))](
            input_ids, audio_mask, audio_table, text_table, x,
            input_ids.stride(0), input_ids.stride(1), input_ids.stride(2), audio_mask.stride(0), audio_mask.stride(1),
            audio_table.stride(0), text_table.stride(0), x.stride(0), x.stride(1),
            audio_rows // C, hidden,
            BOOKS=C, BLOCK_H=block, num_warps=num_warps(block),
        )
    return x


def embed_ref(input_ids: torch.Tensor, audio_mask: torch.Tensor, audio_table: torch.Tensor,
              text_table: torch.Tensor) -> torch.Tensor:
    """Plain-PyTorch `embed`, operation for operation as upstream OmniVoice embeds its mixed rows."""
    n_books = input_ids.shape[1]
    n_classes = audio_table.shape[0] // n_books
    offsets = torch.arange(n_books, device=input_ids.device).view(1, -1, 1) * n_classes
    audio_ids = input_ids * audio_mask.unsqueeze(1) + offsets  # [B, C, S]; text positions -> id 0 of each book
    audio = torch.nn.functional.embedding(audio_ids, audio_table).sum(dim=1)  # [B, S, H]
    text = torch.nn.functional.embedding(input_ids[:, 0, :], text_table)  # [B, S, H]
    return torch.where(audio_mask.unsqueeze(-1), audio, text)
