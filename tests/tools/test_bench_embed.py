"""tools/kernels/bench_embed.py without a GPU: its arguments, and its check in Triton's interpreter at small sizes
(the kernel passes; a kernel that drops a codebook fails)."""
import pytest
import torch

from tools.kernels import bench_embed as bench

pytest.importorskip("triton")
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"  # Triton's interpreter runs CPU tensors only
SMALL = {"books": 3, "classes": 5, "hidden": 24, "vocab": 11}


def test_arguments():
    args = bench.parse_args([])
    assert args.rows == [192, 320, 896, 1536, 7168] and args.json is None
    assert bench.parse_args(["--rows", "17", "--json", "x.json"]).rows == [17]


def test_inputs_mix_text_and_audio_rows_in_range():
    ids, audio, audio_table, text_table = bench.inputs(20, exact=True, device="cpu", **SMALL)
    assert ids.shape == (1, 3, 20) and audio.shape == (1, 20) and not audio[0, :3].any() and audio[0, 3:].all()
    assert audio_table.shape == (15, 24) and text_table.shape == (11, 24)
    assert ids[0, :, 3:].max() < 5 and ids[0, 0].max() < 11


def test_check_passes_the_kernel_and_fails_one_that_drops_a_codebook(monkeypatch):
    assert bench.check(7, device=DEVICE, **SMALL) == []

    def dropped(ids, audio, audio_table, text_table, **kwargs):
        return bench.embed_ref(ids[:, :-1], audio, audio_table[:-5], text_table)

    monkeypatch.setattr(bench, "embed", dropped)
    failures = bench.check(7, device=DEVICE, **SMALL)
    assert len(failures) == 2 and failures[0].startswith("7 rows, exact tables:")


@pytest.mark.skipif(torch.cuda.is_available(), reason="the refusal is for machines without CUDA")
def test_main_needs_cuda(capsys):
    assert bench.main(["--rows", "8"]) == 2
    assert "needs CUDA" in capsys.readouterr().err


def test_key_ranges_are_the_runners_blocks():
    start, end = bench.key_ranges(192, "cpu")
    assert start[:121].eq(0).all() and end[:121].eq(121).all()
    assert start[121:183].eq(121).all() and end[121:183].eq(183).all()
    assert start[183:].eq(183).all() and end[183:].eq(192).all()  # the pads' block
    assert sum(bench.LAYOUTS[1536]) < 1536 and all(sum(blocks) < rows for rows, blocks in bench.LAYOUTS.items())
