"""Quantization of the LM's linears: `quantize_(model, QuantConfig(...), calibration_fn)`, save/load with the
config in the file's metadata, and the realtime recipe (which scheme runs on this GPU).

Modules: `config` (QuantConfig), `linears` (W4A4Linear, W8A8Linear, W8A8FP8Linear), `api` (quantize_,
save_quantized, load_quantized), `realtime` (realtime_scheme, quantize_for_realtime).
"""
from engine.quant.api import (
    load_quantized,
    quantization_plan,
    quantize_,
    record_input_amax,
    replace_module,
    save_quantized,
    target_linears,
)
from engine.quant.config import TARGET_NAMES, QuantConfig
from engine.quant.linears import (
    QUANTIZED_LINEARS,
    W4A4Linear,
    W8A8FP8Linear,
    W8A8Linear,
)
from engine.quant.realtime import (
    backend_label,
    quantize_for_realtime,
    realtime_config,
    realtime_scheme,
)

__all__ = [
    "QUANTIZED_LINEARS", "TARGET_NAMES", "QuantConfig", "W4A4Linear", "W8A8FP8Linear", "W8A8Linear",
    "backend_label", "load_quantized", "quantization_plan", "quantize_", "quantize_for_realtime",
    "realtime_config", "realtime_scheme", "record_input_amax", "replace_module", "save_quantized",
    "target_linears",
]
