"""tools/work_per_audio.py: the FLOP arithmetic against a hand count and against the model's own linears, the pieces
against those the engine itself generates (its prompts, packed rows and batches, for streams and renders), the
command line's errors and its figures."""
import json

import pytest
import torch

from app.api.voices import BUILTIN
from engine.config import GenerationConfig, ModelConfig
from engine.constants import DEMO_MODEL
from engine.lm.checkpoint import load_lm
from engine.lm.runner import packed_rows
from engine.request import SpeechRequest
from tools import work_per_audio
from tools.bench_clients import PARAGRAPH
from tools.work_per_audio import Piece, Work, gemm_flop, parse, planned_pieces

TINY = ModelConfig(hidden_size=4, intermediate_size=6, num_layers=2, num_heads=2, num_kv_heads=1, head_dim=2,
                   audio_vocab_size=3, num_codebooks=2)


def test_the_figures_per_audio_second_are_the_hand_count():
    # per layer: qkv 4 x (4 + 2 + 2) + o 4 x 4 + gate_up 4 x 12 + down 6 x 4 = 120 weights; heads 4 x 2 x 3 = 24
    # piece a: 10 prompt positions + 4 frames = 14 rows; b: 7 + 3 = 10 rows; 7 frames = 0.28 s; 3 steps
    work = Work([Piece(0, 10, 4, 14), Piece(1, 7, 3, 10)], num_step=3, sizes=TINY)
    assert work.audio_s == pytest.approx(0.28)
    assert work.row_steps_per_audio_s == pytest.approx(24 * 3 / 0.28)
    # GEMM per step: 2 x (24 rows x 2 layers x 120 + 14 target rows (cond + uncond) x 24) = 2 x (5760 + 336)
    assert work.gemm_flop_per_audio_s == pytest.approx(12192 * 3 / 0.28)
    # attention per step: 4 x 2 layers x 2 heads x head_dim 2 x (10^2 + 4^2 + 7^2 + 3^2) = 32 x 174
    assert work.attention_flop_per_audio_s == pytest.approx(5568 * 3 / 0.28)
    assert work.ceiling(2.0) == pytest.approx(2e12 / ((12192 + 5568) * 3 / 0.28))


def test_the_gemm_flop_of_a_step_are_the_model_linears_weights_times_rows():
    lm = load_lm(DEMO_MODEL, torch.device("cpu"), torch.float32)
    layer_weights = sum(m.weight.numel() for m in lm.layers.modules() if isinstance(m, torch.nn.Linear))
    heads = lm.audio_heads.weight.numel()
    rows, target_rows = 896, 430
    assert gemm_flop(lm.cfg, rows, target_rows) == 2 * (rows * layer_weights + target_rows * heads)


def made_by(engine, run) -> list[Piece]:
    """The pieces `engine` generates in `run(engine)`: each prompt its generation asks for, in the call it came in."""
    made, calls = [], []
    prompt_of, render_many = engine._prompt, engine.render_many

    def spy_render_many(requests, cancel=None):
        calls.append(len(requests))
        return render_many(requests, cancel)

    def spy_prompt(plan, index, chunk0_tokens):
        prompt = prompt_of(plan, index, chunk0_tokens)
        made.append(Piece(len(calls) - 1, prompt.ids.shape[1], prompt.target_len, packed_rows(prompt)))
        return prompt

    engine._prompt, engine.render_many = spy_prompt, spy_render_many
    try:
        run(engine)
    finally:
        del engine._prompt, engine.render_many
    return made


STEPS = GenerationConfig(num_step=2, seed=0)  # the pieces do not depend on the steps: the engine's run stays short


@pytest.mark.parametrize("instruct", [BUILTIN["alloy"], None], ids=["designed", "automatic"])
def test_a_stream_has_the_pieces_and_groups_the_engine_generates(engine, instruct):
    request = SpeechRequest(text=PARAGRAPH, instruct=instruct, config=STEPS)
    made = made_by(engine, lambda e: list(e.stream(PARAGRAPH, instruct=instruct, config=STEPS)))
    pieces = planned_pieces(engine, request, stream=True)
    assert pieces == made
    assert [p.call for p in pieces] == [0, 1, 1, 2, 2]  # the first piece alone, then groups of two


def test_a_render_has_the_chunks_the_engine_generates(engine, voice):
    long_text = PARAGRAPH + " " + PARAGRAPH  # over 30 s: chunked
    for with_voice in (voice, None):  # a voice's chunks, and chunk 0 as the reference of the rest
        request = SpeechRequest(text=long_text, voice=with_voice, config=STEPS)
        made = made_by(engine, lambda e: e.render(request))
        pieces = planned_pieces(engine, request, stream=False)
        assert len(pieces) > 1 and pieces == made


@pytest.mark.parametrize("argv, complaint", [
    ([], "one of the arguments --text --workload is required"),
    (["--text", "Hi.", "--workload", "baseline"], "not allowed with argument"),
    (["--workload", "nope"], "invalid choice: 'nope'"),
    (["--text", "Hi.", "--voice", "nobody"], "invalid choice: 'nobody'"),
    (["--workload", "baseline", "--voice", "alloy"], "--voice goes with --text"),
    (["--text", "Hi.", "--tflops", "0"], "--tflops must be above 0"),
    (["--text", "Hi.", "--steps", "0"], "steps must be a whole number from 1 to 128"),
])
def test_argument_errors(capsys, argv, complaint):
    with pytest.raises(SystemExit) as stop:
        parse(argv)
    assert stop.value.code == 2 and complaint in capsys.readouterr().err


def test_the_command_line_prints_and_writes_the_baseline_figures(engine, monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(work_per_audio, "load_engine", lambda args, device: engine)
    out = tmp_path / "work.json"
    assert work_per_audio.main(["--demo", "--workload", "baseline", "--tflops", "700", "--json", str(out)]) == 0
    written = json.loads(out.read_text())
    (piece,) = written["pieces"]
    total = written["total"]
    assert piece["target_frames"] == 285  # the baseline's fixed 11.4 s
    assert total["audio_s"] == pytest.approx(11.4) and total["steps"] == 32
    assert total["row_steps_per_audio_s"] == pytest.approx(piece["rows"] * 32 / 11.4)
    flop = total["gemm_tflop_per_audio_s"] + total["attention_tflop_per_audio_s"]
    assert total["ceiling_audio_s_per_s"] == pytest.approx(700 / flop)
    printed = capsys.readouterr().out
    assert f"| 0 | 0 | {piece['prompt_len']} | 285 | {piece['rows']} | 11.40 |" in printed
    assert f"ceiling at 700 TFLOP/s: {total['ceiling_audio_s_per_s']:.1f} audio seconds per second" in printed
