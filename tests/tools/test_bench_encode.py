"""tools/bench_encode.py runs end to end and reports every format for both encoders."""
from tools.bench_encode import FORMATS, main


def test_reports_every_format(capsys):
    assert main(["--runs", "1", "--chunk-s", "0.2"]) == 0
    rows = [line.split() for line in capsys.readouterr().out.splitlines()[2:]]
    assert [row[0] for row in rows] == list(FORMATS)
    for row in rows:  # PyAV, CLI cold, CLI warm in ms, then the share of the chunk the CLI let out
        assert float(row[1]) >= 0 and float(row[2]) > 0 and float(row[3]) > 0 and row[4].endswith("%")
