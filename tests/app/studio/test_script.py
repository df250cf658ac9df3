"""The Studio script format: every construct, line-numbered errors, and the round trip through format_script."""
import time

import pytest

from app.studio.parse import parse_script
from app.studio.script import MAX_LINES, Chapter, Line, Options, Pause, Script, ScriptError, check_voices
from app.studio.write import format_script

EVERYTHING = """\
[voice Bob = Male, Low Pitch]
Opening words before any heading.

# Chapter one
It was a *dark* night, said the [book](http://example.org).
Anna: Who is there? [laughter]
[Old Tom] Only me. [pause 500ms] Only me, I said. {speed 0.9, instruct "whisper"}
[pause 2s]
<!-- the director's note
     over two lines -->
Bob: Hello. {seed 7, duration 2.5s, language English}

## Chapter two
- A list item, read without its bullet.
> A quote, read without its mark.
### A small heading is read
He plays the [B EY1 S] guitar.
\\Note: this line is narration.
Costs 5 \\{dollars\\} and \\[pause 1s] is literal.
小明：你好。
---
Last line.
"""


def strip_numbers(script):
    """The script's content without source line numbers (they change when a script is rewritten)."""
    return ([(c.title, c.level, [(type(i).__name__, *((i.text, i.voice, i.options, i.paragraph)
                                                      if isinstance(i, Line) else (i.seconds,)))
                                 for i in c.items]) for c in script.chapters], script.designed)


def test_every_construct():
    script = parse_script(EVERYTHING)
    assert script.designed == {"Bob": "male, low pitch"}
    titles = [(c.title, c.level, c.number) for c in script.chapters]
    assert titles == [(None, 1, 0), ("Chapter one", 1, 4), ("Chapter two", 2, 13)]
    opening, one, two = script.chapters
    assert opening.items == (Line(2, "Opening words before any heading.", None, Options(), True),)
    assert one.items == (
        Line(5, "It was a dark night, said the book.", None, Options(), True),
        Line(6, "Who is there? [laughter]", "Anna"),
        Line(7, "Only me.", "Old Tom", Options(speed=0.9, instruct="whisper")),
        Pause(7, 0.5),
        Line(7, "Only me, I said.", "Old Tom", Options(speed=0.9, instruct="whisper")),
        Pause(8, 2.0),
        Line(11, "Hello.", "Bob", Options(seed=7, duration=2.5, language="en")),
    )
    assert [(i.number, i.text, i.voice, i.paragraph) for i in two.items] == [
        (14, "A list item, read without its bullet.", None, True),
        (15, "A quote, read without its mark.", None, False),
        (16, "A small heading is read", None, False),
        (17, "He plays the [B EY1 S] guitar.", None, False),
        (18, "Note: this line is narration.", None, False),
        (19, "Costs 5 {dollars} and [pause 1s] is literal.", None, False),
        (20, "你好。", "小明", False),
        (22, "Last line.", None, True),  # a rule is a paragraph break
    ]
    assert script.voice_names() == {"Anna", "Old Tom", "Bob", "小明"}
    assert script.designed_instruct("BOB") == "male, low pitch"


def test_round_trip():
    script = parse_script(EVERYTHING)
    text = format_script(script)
    again = parse_script(text)
    assert strip_numbers(again) == strip_numbers(script)
    assert format_script(again) == text  # the written form is a fixed point


@pytest.mark.parametrize("text", [
    "# Not a heading", "[laughter] comes first", "Note: not a speaker", "- not a list", "1. not a list",
    "> not a quote", "---", "*stars* and _underscores_ and `ticks`", "a {brace} and [pause 1s] and \\ backslash",
    "<!-- not a comment -->", "<b>not a tag</b>", "[a link](not-a-url)", "\\Note", "[Old Tom] not a speaker",
])
def test_round_trip_of_narration_that_looks_like_markup(text):
    written = format_script(Script((Chapter(None, items=(Line(1, text, None, Options(), True),)),)))
    script = parse_script(written)
    assert [line.text for line in script.lines] == [text]
    assert script.lines[0].voice is None


@pytest.mark.parametrize("voice", ["Anna", "Old Tom", "dr who", "R2-D2", "Anna [calm]", "小明"])
def test_round_trip_of_voice_names(voice):
    source = parse_script(f"[{voice.replace('[', chr(92) + '[').replace(']', chr(92) + ']')}] Hi there.")
    assert source.lines[0].voice == voice
    assert parse_script(format_script(source)).lines[0].voice == voice


@pytest.mark.parametrize("text, line, words", [
    ("", 0, "empty"),
    ("\n\n   \n", 0, "empty"),
    ("<!-- only a comment -->", 0, "empty"),
    ("Fine.\nAnna:", 2, "nothing to say"),
    ("Fine.\n[pause 2 minutes]", 2, "is not a pause"),
    ("Fine.\n[pause 61s]", 2, "is not a pause"),
    ("Fine.\n[Pause]", 2, "is not a pause"),
    ("Hi {speed 9}", 1, "speed must be a number from 0.25 to 4"),
    ("Hi {speed fast}", 1, "speed must be a number"),
    ("Hi {volume 3}", 1, "unknown option 'volume'"),
    ("Hi {speed 1, speed 1}", 1, "given twice"),
    ("Hi {seed -1}", 1, "seed must be a whole number"),
    ("Hi {seed 1.5}", 1, "seed must be a whole number"),
    ("Hi {language Klingonese}", 1, "Unknown language 'Klingonese'"),
    ("Hi {instruct \"angry robot\"}", 1, "Unknown instruct item"),
    ("Hi {duration 0}", 1, "duration must be a number above 0"),
    ("Hi {speed}", 1, "cannot read the option"),
    ("a {b} c", 1, "options go in one"),
    ("[pause 1s] {speed 0.9}", 1, "options need a spoken line"),
    ("#\nHi", 1, "a heading needs a title"),
    ("[voice Bob = ]\nHi", 1, "needs a description"),
    ("[voice Bob = purple]\nHi", 1, "Unknown instruct item"),
    ("[voice Bob = male]\n[voice bob = female]\nHi", 2, "already defined on line 1"),
    ("Hi\n<!-- never closed", 0, "never closed"),
    ("Fine.\nAnd then [pause 2s", 2, "'[pause 2s' is not closed"),  # was spoken as narration
    ("Fine.\nAnna: wait [pause", 2, "'[pause' is not closed"),
    ("Fine.\nWait [PAUSE 1S", 2, "'[PAUSE 1S' is not closed"),
    ("Fine.\n[voice Bob = male, low pitch\nBob: Hi.", 2, "is not closed: end a voice definition with ]"),
])
def test_errors_name_the_line(text, line, words):
    with pytest.raises(ScriptError) as caught:
        parse_script(text)
    problems = caught.value.problems
    assert any(p.line == line and words in p.message for p in problems), problems
    if line:
        assert f"line {line}: " in str(caught.value)


def test_all_problems_are_reported_at_once():
    with pytest.raises(ScriptError) as caught:
        parse_script("One {speed 9}\nTwo\nThree {volume 1}\n[pause x]\n")
    assert [p.line for p in caught.value.problems] == [1, 3, 4]


def test_unknown_voices():
    script = parse_script("[voice Bob = male]\nAnna: Hi.\nBob: Hello.\nZed: Who?\nanna: again\n")
    with pytest.raises(ScriptError) as caught:
        check_voices(script, ["ANNA", "Carl"])
    assert [(p.line, "'Zed'" in p.message) for p in caught.value.problems] == [(4, True)]
    check_voices(script, ["Anna", "Zed"])  # designed voices need no saved voice


def test_lowercase_prefix_is_narration():
    assert parse_script("he said: come here").lines[0] == Line(1, "he said: come here", None, Options(), True)
    assert parse_script("Time 10:30 is late.").lines[0].voice is None


def test_many_lines_and_the_limit():
    body = "".join(f"Anna: Line number {i}.\n" for i in range(10_000))
    start = time.perf_counter()
    script = parse_script(body)
    assert len(script.lines) == 10_000 and time.perf_counter() - start < 10
    with pytest.raises(ScriptError, match=f"at most {MAX_LINES:,}"):
        parse_script("Hi.\n" * (MAX_LINES + 1))


def test_not_text():
    with pytest.raises(ScriptError, match="not bytes"):
        parse_script(b"Hi")
