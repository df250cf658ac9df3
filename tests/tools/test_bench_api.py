"""tools/bench_api.py against a real `serve` on the tiny checkpoint: both inputs reported, and the API's
first byte never before the engine's first audio (the job starts after the request arrives)."""
from tools.bench_api import WORKLOADS, main


def test_reports_first_byte_beside_the_engine(capsys):
    assert main(["--demo", "--runs", "1", "--steps", "4", "--mode", "eager"]) == 0
    rows = [line.split() for line in capsys.readouterr().out.splitlines()[2:]]
    assert [row[0] for row in rows] == list(WORKLOADS)
    for name, chars, api_ms, engine_ms, adds_ms, total_ms, audio_s in rows:
        assert int(chars) == len(WORKLOADS[name]) and float(audio_s) > 0
        assert 0 < float(engine_ms) <= float(api_ms) <= float(total_ms)
        assert float(adds_ms) >= 0
