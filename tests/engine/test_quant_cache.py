"""Realtime mode's cached conversion is keyed by everything it was made from, and calibration sees every
calibration batch."""
from dataclasses import fields

import torch
from torch import nn

from engine.constants import DEMO_MODEL
from engine.quant import QuantConfig, record_input_amax
from engine.quant.realtime import conversion_path

# one other valid value per field (group_size is fixed by the numerics contract)
OTHER_VALUES = {"rank": 16, "smooth_alpha": None, "keep_fp16": ("layers.0.*",), "w8a8": ("*.down_proj",),
                "fp8": ("*",), "fp8_rank": 16}


def test_the_cache_file_changes_with_dtype_and_every_quantization_setting(tmp_path, monkeypatch):
    monkeypatch.setenv("VOICEDESK_HOME", str(tmp_path))
    assert set(OTHER_VALUES) | {"group_size"} == {f.name for f in fields(QuantConfig)}
    base = QuantConfig()
    paths = [conversion_path(DEMO_MODEL, base, torch.float16), conversion_path(DEMO_MODEL, base, torch.bfloat16)]
    paths += [conversion_path(DEMO_MODEL, QuantConfig(**{name: value}), torch.float16)
              for name, value in OTHER_VALUES.items()]
    assert len(set(paths)) == len(paths)
    assert conversion_path(DEMO_MODEL, QuantConfig(), torch.float16) == paths[0]  # and it is stable
    assert all(p.parent == tmp_path / "cache" / "quantized" for p in paths)


class TwoLinears(nn.Module):
    def __init__(self):
        super().__init__()
        self.first, self.second = nn.Linear(4, 3), nn.Linear(3, 2)

    def forward(self, x):
        return self.second(self.first(x))


def test_calibration_keeps_the_maximum_over_every_batch():
    model = TwoLinears()
    batches = [torch.tensor([[5.0, -1.0, 0.5, 0.0]]), torch.tensor([[-2.0, 3.0, 0.25, 0.0]]),
               torch.tensor([[1.0, 0.5, -4.0, 0.0]])]  # each batch holds the largest |x| of one channel

    def calibrate(m):
        for x in batches:
            m(x)

    amax = record_input_amax(model, {"first": model.first, "second": model.second}, calibrate)
    assert amax["first"].tolist() == [5.0, 3.0, 4.0, 0.0]
    with torch.no_grad():
        hidden = torch.cat([model.first(x) for x in batches])
    assert torch.equal(amax["second"], hidden.abs().amax(0))
