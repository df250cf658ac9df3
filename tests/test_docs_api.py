"""docs/api.md's names and limits are the code's: the designed voices and their attributes, the model names, the
speech body's ranges, the queue's default, the answer socket's and Wyoming's limits."""
import re
from pathlib import Path

from app.api import answer_socket, voices
from app.api.schemas import MODELS
from app.settings import RANGES, Settings
from app.wyoming import framing, handler
from engine.checks.budget import DEFAULT_BUDGET_MS, MAX_BUDGET_MS
from engine.config import SETTING_RANGES
from engine.text.limits import MAX_TEXT_CHARS

API_DOC = (Path(__file__).resolve().parents[1] / "docs" / "api.md").read_text(encoding="utf-8")


def row(field: str) -> str:
    """The text of the table row whose first cell is `field` (in backticks)."""
    [line] = [line for line in API_DOC.splitlines() if line.startswith(f"| `{field}` |")]
    return line


def test_the_designed_voices_table_is_the_apis():
    section = API_DOC.split("### OpenAI's voice names")[1].split("\n## ")[0]
    table = dict(re.findall(r"^\| ([a-z]+) \| ([a-z ,-]+) \|$", section, re.M)[1:])  # below the header
    assert table == voices.BUILTIN


def test_the_model_names_are_the_apis():
    assert re.findall(r"`([\w.-]+)`", row("model").split("|")[2]) == list(MODELS)


def test_the_speech_bodys_limits_are_the_codes():
    assert f"up to {MAX_TEXT_CHARS:,} characters" in row("input")
    _, low, high, _ = SETTING_RANGES["speed"]
    assert f"| {low}-{high} (default 1.0) |" in row("speed")
    assert f"`steps` ({RANGES['steps'][0]}-{RANGES['steps'][1]})" in API_DOC
    assert f"`guidance` ({RANGES['guidance'][0]:g}-{RANGES['guidance'][1]:g})" in API_DOC
    assert f"the `api_max_waiting` setting, {Settings().api_max_waiting} by" in " ".join(API_DOC.split())


def test_the_streamed_answers_limits_are_the_codes():
    text = " ".join(API_DOC.split())
    assert f"`check_budget_ms` (0 to {MAX_BUDGET_MS}, default {DEFAULT_BUDGET_MS}:" in text
    assert answer_socket.MAX_MESSAGE_BYTES == framing.MAX_BLOCK_BYTES == 2**20
    assert f"over {MAX_TEXT_CHARS:,} characters, or one message over 1 MiB" in text
    assert f"`audio-chunk` ({handler.SAMPLES_PER_CHUNK} samples, 24 kHz" in text
