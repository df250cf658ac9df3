"""`launcher.py bench` and `profile` on the tiny checkpoint (on the GPU where there is one, else the CPU):
output structure and consistency."""
import gzip
import json
import re

import pytest
import torch

import launcher
from tools.trace_stats import (
    PairGap,
    category,
    cpu_launch_count,
    kernel_events,
    stats_from_events,
)

ON_GPU = torch.cuda.is_available()  # the bench and the profile run the demo model there


def test_bench_outputs_are_consistent(tmp_path, capsys):
    md = tmp_path / "BENCH.md"
    assert launcher.main(["bench", "--demo", "--modes", "eager", "--runs", "2", "--warmup", "0",
                          "--workloads", "en-ref3-out3", "--results", str(tmp_path), "--append-md", str(md)]) == 0
    out = capsys.readouterr().out
    assert "| eager | en-ref3-out3 |" in out and "mean tok agree" in out
    (result,) = tmp_path.glob("bench-*.json")
    data = json.loads(result.read_text())
    assert {"date", "torch", "commit", "gpu", "command"} <= set(data["info"])
    (row,) = data["rows"]
    assert row["mode"] == "eager" and row["workload"] == "en-ref3-out3" and len(row["times_s"]) == 2
    assert row["spread_s"][0] <= row["median_s"] <= row["p90_s"] <= row["spread_s"][1]
    assert row["p90_s"] == pytest.approx(row["median_s"] + 0.8 * (row["spread_s"][1] - row["median_s"]))  # 2 runs
    assert row["rtf"] == pytest.approx(row["median_s"] / row["audio_s"])
    assert row["audio_s"] == pytest.approx(3.2, abs=0.05)  # duration 3.0 s + 0.1 s padding per side
    assert row["ratios"]["speedup_vs_eager"] == pytest.approx(1.0)
    # filled in (on the CPU the eager mode is the fp32 reference itself; test_fidelity checks the measures)
    assert all(row[k] is not None for k in ("token_agreement", "step0_agreement", "mel_distance_db", "logits_cosine"))
    assert row["first_audio_s"] is not None and 0 < row["first_audio_s"]
    assert row["kernels"] > 0 if ON_GPU else row["kernels"] is None  # GPU figures only where there is a GPU
    assert "| eager | en-ref3-out3 |" in md.read_text() and data["info"]["commit"] in md.read_text()


def test_profile_writes_a_trace(tmp_path, capsys):
    trace = tmp_path / "t.json.gz"
    assert launcher.main(["profile", "--demo", "--mode", "eager", "--workload", "en-ref3-out3",
                          "--out", str(trace)]) == 0
    kernels = int(re.search(r"kernels (\d+)", capsys.readouterr().out).group(1))
    assert kernels > 0 if ON_GPU else kernels == 0  # a CPU run launches no CUDA kernels
    events = json.load(gzip.open(trace, "rt"))["traceEvents"]
    assert any(e.get("name", "").startswith("aten::linear") for e in events)


def test_trace_statistics_on_a_synthetic_trace():
    def k(name, ts, dur):
        return {"cat": "kernel", "name": name, "ts": ts, "dur": dur}
    trace = {"traceEvents": [
        k("nvjet_sm90_hsh_128x64", 0, 10), k("void at::native::elementwise_kernel<add>", 15, 5),
        k("cudnn_generated_fort_native_sdpa_sm90_flash", 18, 4),  # overlaps the previous one by 2 us
        k("_rmsnorm_kernel", 40, 10),
        {"cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": 0, "dur": 1},
        {"cat": "cuda_runtime", "name": "cudaGraphLaunch", "ts": 1, "dur": 1},
        {"cat": "cuda_runtime", "name": "cudaStreamIsCapturing", "ts": 2, "dur": 1},
    ]}
    s = stats_from_events(kernel_events(trace))
    assert s.kernels == 4 and s.span_ms == pytest.approx(0.050)
    assert s.busy_ms == pytest.approx(0.027)  # union: 10 + 7 + 10 us
    assert s.busy_fraction == pytest.approx(27 / 50)
    assert s.by_category_count == {"gemm": 1, "elementwise/copy": 1, "attention": 1, "reduction": 1}
    assert s.gap_median_us == pytest.approx(5.0)  # gaps 5, 0 (overlap), 18
    assert cpu_launch_count(trace) == 2
    assert category("_w4a4_gemm_kernel") == "gemm" and category("triton_snake") == "other"


def test_idle_gaps_are_summed_by_the_kernels_around_them():
    """Where the GPU idles, by pair of neighbours: the pair with the most idle time first, each gap counted for the
    kernel before and the kernel after it (not the other way round); a gap of a millisecond or more (the host's,
    between graph replays) left out."""
    def k(name, ts, dur):
        return {"cat": "kernel", "name": name, "ts": ts, "dur": dur}
    trace = {"traceEvents": [
        k("norm", 0, 2), k("fp8_gemm", 8, 4),  # norm -> fp8_gemm: 6 us
        k("norm", 12.5, 2), k("fp8_gemm", 20.5, 4),  # 0.5 us fp8_gemm -> norm; 6 us norm -> fp8_gemm
        k("swiglu", 25, 1),  # 0.5 us fp8_gemm -> swiglu
        k("norm", 2000, 2),  # 1974 us: the host's
    ]}
    gaps = stats_from_events(kernel_events(trace)).top_gaps
    assert gaps[0] == PairGap("norm", "fp8_gemm", total_ms=0.012, count=2, median_us=6.0)
    assert {(g.before, g.after, g.count) for g in gaps[1:]} == {("fp8_gemm", "norm", 1), ("fp8_gemm", "swiglu", 1)}
    assert all(g.total_ms == 0.0005 for g in gaps[1:])
