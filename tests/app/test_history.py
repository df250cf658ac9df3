import logging

import numpy as np
import soundfile as sf

from app.history import History

RATE = 24000


def tone(seconds):
    return (0.2 * np.sin(np.arange(int(seconds * RATE)) / 5)).astype(np.float32)


def test_add_list_get_delete(tmp_path):
    history = History(tmp_path)
    first = history.add(tone(0.5), RATE, "Hello.", voice="Ann", rtf=0.1)
    second = history.add(tone(0.3), RATE, "Bye.", voice="Bob", rtf=0.2)
    assert [e.text for e in history.entries()] == ["Hello.", "Bye."]
    assert history.get(first.id).meta == {"voice": "Ann", "rtf": 0.1}
    assert sf.info(str(second.audio)).frames == int(0.3 * RATE)
    history.delete(first.id)
    assert [e.id for e in history.entries()] == [second.id] and not first.audio.exists()


def test_a_lone_surrogate_in_the_text_is_stored_without_it(tmp_path):
    """JSON can carry half of a UTF-16 pair (an API client's "\\ud800"), UTF-8 cannot: the entry keeps the text as
    the engine speaks it (clean_text drops them), the pair-less halves dropped; a whole pair (an emoji) stays."""
    history = History(tmp_path)
    history.add(tone(0.05), RATE, "Lone \ud800half, \udfffand 😀.")
    assert [e.text for e in History(tmp_path).entries()] == ["Lone half, and 😀."]


def test_count_cap_drops_the_oldest(tmp_path):
    history = History(tmp_path, max_entries=3)
    ids = [history.add(tone(0.05), RATE, f"t{i}").id for i in range(5)]
    assert [e.id for e in history.entries()] == ids[2:]
    assert sorted(p.stem for p in history.audio_dir.iterdir()) == sorted(ids[2:])


def test_size_cap_keeps_the_newest_even_when_it_alone_is_too_big(tmp_path):
    one_second = 2 * RATE + 44  # 16-bit WAV
    history = History(tmp_path, max_bytes=int(2.5 * one_second))
    ids = [history.add(tone(1.0), RATE, f"t{i}").id for i in range(4)]
    assert [e.id for e in history.entries()] == ids[2:]
    big = history.add(tone(3.0), RATE, "big").id
    assert [e.id for e in history.entries()] == [big]


def test_damaged_lines_and_missing_audio_are_skipped(tmp_path, caplog):
    history = History(tmp_path)
    keep = history.add(tone(0.1), RATE, "keep")
    lost = history.add(tone(0.1), RATE, "lost")
    lost.audio.unlink()
    with history.index.open("a") as f:
        f.write('{"id": "20260101-000000-abcdef", "created": "x", "te')  # cut short by a crash
        f.write('\n{"id": "../../etc/passwd", "created": "x", "text": "y"}\n')
    with caplog.at_level(logging.WARNING, logger="app"):
        assert [e.id for e in history.entries()] == [keep.id]
    assert "unreadable line" in caplog.text and "bad id" in caplog.text and "missing" in caplog.text
    history.add(tone(0.1), RATE, "after")  # appending still works after a damaged line
    assert [e.text for e in history.entries()] == ["keep", "after"]


def test_a_line_torn_by_a_crash_does_not_swallow_the_next_entry(tmp_path, caplog):
    history = History(tmp_path)
    kept = history.add(tone(0.1), RATE, "Before the crash.")
    torn = history.add(tone(0.1), RATE, "Being written when the power went.")
    line = history.index.read_bytes().splitlines(keepends=True)[-1]
    with history.index.open("r+b") as f:  # the crash wrote half of the last line
        f.truncate(len(history.index.read_bytes()) - len(line) // 2)
    with caplog.at_level(logging.WARNING, logger="app"):
        after = History(tmp_path).add(tone(0.1), RATE, "After the restart.")
    assert [e.id for e in History(tmp_path).entries()] == [kept.id, after.id]
    assert "cut short by a crash" in caplog.text and not torn.audio.exists()  # its WAV went at the restart


def test_crash_leftovers_are_removed_when_the_history_opens(tmp_path):
    history = History(tmp_path)
    kept = history.add(tone(0.1), RATE, "Listed.")
    stray = history.audio_dir / "20260101-000000-abcdef.wav"  # written, then the crash came before its line
    sf.write(stray, tone(0.1), RATE)
    temps = [history.root / ".index.jsonl.x1y2.tmp", history.audio_dir / ".20260101-000001-abcdef.wav.z9.tmp"]
    for tmp in temps:
        tmp.write_bytes(b"half")
    reopened = History(tmp_path)
    assert [e.id for e in reopened.entries()] == [kept.id] and kept.audio.exists()
    assert not stray.exists() and not any(t.exists() for t in temps)


def test_update_changes_the_stored_values(tmp_path):
    history = History(tmp_path)
    entry = history.add(tone(0.2), RATE, "Hello.", voice="Ann", heard_first_audio_s=None)
    other = history.add(tone(0.2), RATE, "Bye.", voice="Bob")
    history.update(entry.id, heard_first_audio_s=0.25, rtf=0.1)
    reopened = History(tmp_path)  # what is on disk, not a copy in memory
    assert reopened.get(entry.id).meta == {"voice": "Ann", "heard_first_audio_s": 0.25, "rtf": 0.1}
    assert reopened.get(other.id).meta == {"voice": "Bob"}  # the others as they were
    history.delete(other.id)
    history.update(other.id, rtf=9.0)  # a deleted entry stays deleted
    assert [e.id for e in History(tmp_path).entries()] == [entry.id]
