"""`launcher.py quant-report` on the tiny checkpoint (CPU): table structure, the SQNR columns on a
layer with planted activation outliers, the mixed-precision rules and the prompt positions used."""
import pytest
import torch
from torch import nn

import launcher
from engine.lm.checkpoint import read_model_config
from engine.lm.decode import build_cfg_batch
from engine.lm.prompt import PromptItem
from engine.quant import QuantConfig
from kernels.w4a4_ref import GROUP
from tools.quant_report import (
    CALIBRATION_WORKLOADS,
    EVALUATION_WORKLOADS,
    SVDQUANT_LABEL,
    VARIANTS,
    W8A8_LABEL,
    LinearRow,
    evenly,
    linear_sqnrs,
    real_positions,
    suggest,
)
from tools.workloads import select

TINY = launcher.DEMO_MODEL


def table_rows(md: str, header_start: str) -> list[list[str]]:
    """Cells of the markdown table whose header starts with `header_start` (separator row dropped)."""
    lines = md.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(header_start))
    rows = []
    for line in lines[start:]:
        if not line.startswith("|"):
            break
        rows.append([c.strip() for c in line.strip("|").split("|")])
    return [rows[0]] + rows[2:]


def test_report_on_the_tiny_checkpoint(tmp_path, capsys):
    md_path = tmp_path / "report.md"
    assert launcher.main(["quant-report", "--demo", "--layers", "0,1", "--tokens", "48", "--out", str(md_path)]) == 0
    md = md_path.read_text()
    assert md.strip() in capsys.readouterr().out
    cfg = read_model_config(TINY)

    header, *rows = table_rows(md, "| layer | linear |")
    labels = [v.label for v in VARIANTS]
    assert header == ["layer", "linear", "K -> N", *labels]
    per_linear = [r for r in rows if r[0].isdigit()]
    q_out = cfg.num_heads * cfg.head_dim
    shapes = {"qkv_proj": (cfg.hidden_size, q_out + 2 * cfg.num_kv_heads * cfg.head_dim),
              "o_proj": (q_out, cfg.hidden_size), "gate_up_proj": (cfg.hidden_size, 2 * cfg.intermediate_size),
              "down_proj": (cfg.intermediate_size, cfg.hidden_size)}
    assert [(r[0], r[1]) for r in per_linear] == [(str(i), kind) for i in (0, 1) for kind in shapes]
    for layer, kind, size, *cells in per_linear:
        k, n = shapes[kind]
        assert size == f"{k} -> {n}"
        values = dict(zip(labels, cells))
        w4a4_fits = k % GROUP == 0  # the tiny model has linears W4A4 cannot take: shown as '-'
        for label in labels[:4]:
            assert (values[label] != "-") == w4a4_fits, (kind, label)
        for label in labels[4:]:
            assert float(values[label]) > 20, (kind, label)  # 8-bit formats are accurate everywhere here
    mean_row = next(r for r in rows if r[0].startswith("**mean of 2**"))  # the two o_proj rows take every variant
    assert mean_row[3:] != ["-"] * len(labels)

    _, *sens = table_rows(md, "| layer | logits cosine")
    assert [r[0] for r in sens] == ["0", "1"]
    for _, cos, err in sens:
        assert 0.9 < float(cos) <= 1 and float(err) == pytest.approx(1 - float(cos), abs=1e-6)
    assert "`QuantConfig(" in md and "ANOTHER CFG batch" in md


@torch.no_grad()
def test_svdquant_beats_rtn_on_planted_outlier_channels():
    gen = torch.Generator().manual_seed(0)
    linear = nn.Linear(256, 128, bias=False)
    nn.init.normal_(linear.weight, std=0.05, generator=gen)
    outliers = torch.tensor([5, 70, 131, 250])  # a few channels 50x larger, as in trained LLM activations

    def activations(rows):
        x = torch.randn(rows, 256, generator=gen)
        x[:, outliers] *= 50
        return x

    amax = activations(512).abs().amax(0)  # calibration and evaluation draw different rows
    sqnr = linear_sqnrs("layers.0.mlp.down_proj", linear, amax, activations(256))
    rtn, smooth, svdq = sqnr["RTN W4A4"], sqnr["smooth only"], sqnr[SVDQUANT_LABEL]
    assert svdq > rtn + 3 and smooth > rtn + 3, sqnr
    assert svdq > max(smooth, sqnr[VARIANTS[2].label]) + 1, sqnr  # the two parts add up
    assert sqnr[W8A8_LABEL] > svdq, sqnr


def row(layer, kind, svdq, w8a8):
    return LinearRow(layer, f"layers.{layer}.mlp.{kind}", 64, 64, {SVDQUANT_LABEL: svdq, W8A8_LABEL: w8a8})


def test_suggestion_flags_the_outlying_layer_and_linears():
    rows = [row(layer, kind, 20.0, 40.0) for layer in range(4) for kind in ("gate_up_proj", "down_proj")]
    rows[3].sqnr[SVDQUANT_LABEL] = 15.0  # layers.1.mlp.down_proj: 5 dB below its kind, int8 fine -> W8A8
    rows[4].sqnr.update({SVDQUANT_LABEL: 10.0, W8A8_LABEL: 25.0})  # layers.2.mlp.gate_up_proj: int8 too poor -> FP16
    cosines = {0: 1 - 1e-4, 1: 1 - 1e-4, 2: 1 - 1.2e-4, 3: 1 - 5e-4}  # layer 3 is 5x the median error
    cfg, reasons = suggest(rows, cosines)
    assert cfg == QuantConfig(w8a8=("layers.3.*", "layers.1.mlp.down_proj"), keep_fp16=("layers.2.mlp.gate_up_proj",))
    assert len(reasons) == 3
    assert suggest([row(0, "down_proj", 20.0, 40.0)], {0: 0.999}) == (QuantConfig(), [])


def test_evaluation_uses_real_positions_of_other_prompts():
    def item(length, target):
        return PromptItem(torch.zeros(8, length, dtype=torch.long), torch.ones(length, dtype=torch.bool), target)

    batch = build_cfg_batch([item(6, 2), item(4, 3)], mask_id=1024, device="cpu")  # S = 6
    expected = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 12, 13, 18, 19, 20]  # cond rows 6 + 4, uncond rows 2 + 3
    assert real_positions(batch).tolist() == expected
    assert evenly(real_positions(batch), 3).tolist() == [0, 7, 20]
    assert evenly(real_positions(batch), 100).tolist() == expected
    calibration_texts = {w.text for w in select(",".join(CALIBRATION_WORKLOADS))}
    assert not calibration_texts & {w.text for w in select(",".join(EVALUATION_WORKLOADS))}
