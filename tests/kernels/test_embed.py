"""The fused input embedding against its plain-PyTorch reference (the model's own embedding, kernels.embed.embed_ref).

Without CUDA the kernel runs in Triton's interpreter (tests/conftest.py) at small odd shapes; with CUDA also at the
model's (8 codebooks of 1025 classes, hidden 1024, a bucket of 896 rows). Two rules: where every codebook sum is
exact in fp32 (multiples of 1/16 below 4 in magnitude: any order of summation gives the same fp32 sum), the kernel
equals the reference bit for bit, in every dtype; on random values, its distance to a float64 reference is at most
twice PyTorch's own in the same dtype plus one ulp of the largest output, and all but 1 % of the elements are
bit-identical to PyTorch's (a sum taken in another order can differ only where it sits at a rounding tie). Outputs are
poisoned with NaN first, so an element the kernel never writes fails.
"""
import pytest
import torch

pytest.importorskip("triton")

from kernels.embed import embed, embed_ref
from kernels.numerics import ulp_distance

ON_GPU = torch.cuda.is_available()  # without CUDA, tests/conftest.py has turned on Triton's interpreter
DEVICE = "cuda" if ON_GPU else "cpu"
gpu_only = pytest.mark.skipif(not ON_GPU, reason="needs CUDA (model-size shapes are too slow to interpret)")
bf16_gpu_only = pytest.mark.skipif(not ON_GPU, reason="the interpreter truncates fp32 -> bf16, GPUs round to nearest")
DTYPES = [torch.float16, torch.float32, pytest.param(torch.bfloat16, marks=bf16_gpu_only)]


def generator(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def tables(books: int, classes: int, vocab: int, hidden: int, dtype, *, exact: bool, seed: int = 0):
    """(audio table [books * classes, hidden], text table [vocab, hidden]): multiples of 1/16 in [-4, 4] when
    `exact` (sums of up to 8 are exact in fp32), else normal values."""
    g = generator(seed)

    def values(rows: int) -> torch.Tensor:
        if exact:
            return torch.randint(-64, 65, (rows, hidden), generator=g).float() / 16
        return torch.randn(rows, hidden, generator=g)

    return values(books * classes).to(DEVICE, dtype), values(vocab).to(DEVICE, dtype)


def mixed_rows(batch: int, books: int, rows: int, classes: int, vocab: int, *, seed: int = 1):
    """(ids [batch, books, rows] int64, audio_mask [batch, rows] bool): the packed layout's mix, text rows holding a
    text token in codebook 0 (and the MASK-like last class elsewhere), audio rows a class per codebook; every item
    has both kinds, the first row text and the last audio."""
    g = generator(seed)
    audio = torch.rand(batch, rows, generator=g) < 0.6
    audio[:, 0], audio[:, -1] = False, True
    ids = torch.randint(0, classes, (batch, books, rows), generator=g)
    text = torch.randint(0, vocab, (batch, rows), generator=g)
    ids[:, 0] = torch.where(audio, ids[:, 0], text)
    ids[:, 1:] = torch.where(audio[:, None], ids[:, 1:], classes - 1)
    return ids.to(DEVICE), audio.to(DEVICE)


def poisoned(batch: int, rows: int, hidden: int, dtype) -> torch.Tensor:
    return torch.full((batch, rows, hidden), float("nan"), dtype=dtype, device=DEVICE)


def embed_poisoned(ids, audio, audio_table, text_table) -> torch.Tensor:
    out = poisoned(ids.shape[0], ids.shape[2], audio_table.shape[1], audio_table.dtype)
    assert embed(ids, audio, audio_table, text_table, out=out) is out
    return out


SMALL = [  # (batch, books, rows, classes, vocab, hidden): odd sizes; hidden past one 1024-column block in the last
    (1, 3, 7, 5, 11, 40),
    (2, 8, 17, 9, 13, 24),
    (3, 2, 1, 4, 6, 16),
    (1, 4, 5, 3, 7, 1030),
]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SMALL)
def test_embed_equals_the_reference_where_the_sums_are_exact(shape, dtype):
    batch, books, rows, classes, vocab, hidden = shape
    audio_table, text_table = tables(books, classes, vocab, hidden, dtype, exact=True)
    ids, audio = mixed_rows(batch, books, rows, classes, vocab)
    got = embed_poisoned(ids, audio, audio_table, text_table)
    assert torch.equal(got, embed_ref(ids, audio, audio_table, text_table))


def assert_as_accurate_as_torch(got: torch.Tensor, torch_out: torch.Tensor, exact: torch.Tensor) -> None:
    assert torch.isfinite(got).all(), "elements left unwritten (still NaN) or not finite"
    kernel_err = (got.double() - exact).abs().max().item()
    torch_err = (torch_out.double() - exact).abs().max().item()
    atol = torch.finfo(got.dtype).eps * exact.abs().max().item()
    assert kernel_err <= 2 * torch_err + atol, f"kernel error {kernel_err:.3g}, torch {torch_err:.3g}, atol {atol:.3g}"
    if got.dtype != torch.float32:
        differing = (ulp_distance(got, torch_out) > 0).sum().item()
        assert differing <= max(1, got.numel() // 100), f"{differing} of {got.numel()} elements round differently"


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SMALL)
def test_embed_is_as_accurate_as_torch_on_random_values(shape, dtype):
    batch, books, rows, classes, vocab, hidden = shape
    audio_table, text_table = tables(books, classes, vocab, hidden, dtype, exact=False)
    ids, audio = mixed_rows(batch, books, rows, classes, vocab)
    got = embed_poisoned(ids, audio, audio_table, text_table)
    exact = embed_ref(ids, audio, audio_table.double(), text_table.double())
    assert_as_accurate_as_torch(got, embed_ref(ids, audio, audio_table, text_table), exact)
    text_rows = ~audio
    assert torch.equal(got[text_rows], text_table[ids[:, 0][text_rows]])  # text rows are copies


def test_embed_reads_strided_ids_and_masks_and_int32_ids():
    """Ids and mask as views into bigger buffers (every other row, the codebooks of a wider tensor), int32 ids, a
    fresh output."""
    books, rows, classes, vocab, hidden = 3, 9, 6, 10, 32
    audio_table, text_table = tables(books, classes, vocab, hidden, torch.float16, exact=True)
    ids, audio = mixed_rows(2, books + 2, 2 * rows, classes, vocab)
    ids, audio = ids[:, 1:1 + books, ::2], audio[:, ::2]  # [2, books, rows] and [2, rows], neither contiguous
    assert not ids.is_contiguous() and not audio.is_contiguous()
    want = embed_ref(ids, audio, audio_table, text_table)
    assert torch.equal(embed(ids, audio, audio_table, text_table), want)
    assert torch.equal(embed(ids.to(torch.int32), audio, audio_table, text_table), want)


def test_embed_reads_strided_tables_and_writes_a_strided_out():
    """Tables and out as column slices of wider buffers (row strides past hidden, as the wrapper allows): the
    kernel steps rows by their strides, not by hidden, and writes nothing outside its columns."""
    batch, books, rows, classes, vocab, hidden = 2, 3, 6, 5, 7, 24
    audio_table, text_table = tables(books, classes, vocab, hidden + 8, torch.float16, exact=True)
    audio_table, text_table = audio_table[:, 8:], text_table[:, 3:3 + hidden]
    ids, audio = mixed_rows(batch, books, rows, classes, vocab)
    wide = poisoned(batch, rows, hidden + 5, torch.float16)
    out = wide[:, :, 5:]
    assert audio_table.stride(0) != hidden and out.stride(1) != hidden
    assert embed(ids, audio, audio_table, text_table, out=out) is out
    assert torch.equal(out, embed_ref(ids, audio, audio_table, text_table))
    assert wide[:, :, :5].isnan().all()


def test_embed_of_all_text_and_all_audio_rows():
    books, rows, classes, vocab, hidden = 4, 5, 7, 9, 48
    audio_table, text_table = tables(books, classes, vocab, hidden, torch.float16, exact=True)
    ids, _ = mixed_rows(1, books, rows, classes, vocab)
    for all_audio, ids_here in ((False, ids), (True, ids % classes)):  # audio rows: every id a class
        audio = torch.full((1, rows), all_audio, dtype=torch.bool, device=DEVICE)
        got = embed_poisoned(ids_here, audio, audio_table, text_table)
        assert torch.equal(got, embed_ref(ids_here, audio, audio_table, text_table))


def test_embed_refuses_what_it_cannot_read():
    audio_table, text_table = tables(3, 5, 7, 16, torch.float16, exact=True)
    ids, audio = mixed_rows(1, 3, 4, 5, 7)
    with pytest.raises(ValueError, match="whole number of classes"):
        embed(ids[:, :2], audio, audio_table, text_table)  # 15 table rows for 2 codebooks
    with pytest.raises(ValueError, match="int64 or int32"):
        embed(ids.float(), audio, audio_table, text_table)
    with pytest.raises(ValueError, match="audio_mask"):
        embed(ids, audio.to(torch.uint8), audio_table, text_table)
    with pytest.raises(ValueError, match="text_table"):
        embed(ids, audio, audio_table, text_table.float())
    with pytest.raises(ValueError, match="out"):
        embed(ids, audio, audio_table, text_table, out=poisoned(1, 4, 16, torch.float32))


@gpu_only
@pytest.mark.parametrize("rows", [192, 896, 1536])
def test_embed_at_the_models_shapes(rows):
    """OmniVoice's sizes in the runner's buffers ([1, 8, rows] ids, [1, rows] mask): exact sums bit for bit, random
    tables by the accuracy rule."""
    books, classes, vocab, hidden = 8, 1025, 4096, 1024
    ids, audio = mixed_rows(1, books, rows, classes, vocab, seed=rows)
    for exact in (True, False):
        audio_table, text_table = tables(books, classes, vocab, hidden, torch.float16, exact=exact, seed=rows)
        got = embed_poisoned(ids, audio, audio_table, text_table)
        want = embed_ref(ids, audio, audio_table, text_table)
        if exact:
            assert torch.equal(got, want)
        else:
            assert_as_accurate_as_torch(got, want, embed_ref(ids, audio, audio_table.double(), text_table.double()))
