"""tools/kernels/bench_pdl.py without a GPU: its refusal to run without CUDA or below sm_90, its arguments, and which
kernels each variant launches with PDL or lets trigger. The chains themselves are checked on Hopper (bitwise against
the plain chain's)."""
import pytest
import torch

pytest.importorskip("triton")
from tools.kernels import bench_pdl as bench  # noqa: E402


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the refusal where there is no GPU")
def test_refuses_to_run_without_a_gpu(capsys):
    assert bench.main([]) == 2
    assert "needs a CUDA GPU" in capsys.readouterr().err


def test_refuses_a_gpu_older_than_hopper(monkeypatch, capsys):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (8, 9))
    assert bench.main(["--rows", "320"]) == 2
    assert "needs sm_90 or later (PDL); this GPU is sm_89" in capsys.readouterr().err
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (9, 0))
    assert bench.refusal() is None


def test_arguments():
    args = bench.parse([])
    assert (args.rows, args.kernels, args.rounds, args.replays, args.json, args.dot) == ([320, 896], 64, 5, 20, None,
                                                                                          None)
    args = bench.parse(["--rows", "256", "--kernels", "7", "--json", "out.json", "--dot", "dots"])
    assert (args.rows, args.kernels, args.json, str(args.dot)) == ([256], 7, "out.json", "dots")
    for wrong in (["--kernels", "0"], ["--rounds", "0"], ["--replays", "0"], ["--rows", "0"], ["--kernels", "x"]):
        with pytest.raises(SystemExit):
            bench.parse(wrong)


def test_which_kernels_each_variant_launches_with_pdl():
    t, g = "T", "G"
    assert bench.launches("TTG", 6, "plain") == [(t, False, False), (t, False, False), (g, False, False)] * 2
    assert bench.launches("TTG", 6, "pdl") == [(t, True, False), (t, True, False), (g, False, False)] * 2
    assert bench.launches("TG", 4, "pdl+trigger") == [(t, True, True), (g, False, False)] * 2
    # only Triton-to-Triton boundaries: the second T waits, the first lets it launch early
    assert bench.launches("TTG", 6, "pdl after Triton") == [(t, False, True), (t, True, False), (g, False, False)] * 2
    assert bench.launches("TG", 4, "pdl after Triton") == [(t, False, False), (g, False, False)] * 2
    assert bench.launches("T", 3, "pdl after Triton") == [(t, False, True), (t, True, True), (t, True, False)]
    assert all(kind == "T" or not (pdl or trigger)
               for variant in bench.VARIANTS for kind, pdl, trigger in bench.launches("TTG", 9, variant))
