"""Importing .txt, .md, .srt and .epub into scripts, on files the tests make (EPUBs written with ebooklib)."""
import zipfile

import pytest
from ebooklib import epub

from app.studio.importers import ImportFailed, import_file, import_srt, import_text
from app.studio.parse import parse_script

PROSE = """\
Chapter 1

It was a dark
and stormy night.

Note: nobody came.

# not a heading, {not options}, [pause 1s] not a pause, *not emphasis*

CHAPTER TWO: THE END

Last words.
"""


def texts(script):
    return [(c.title, [(line.voice, line.text) for line in c.lines]) for c in script.chapters]


def test_text_paragraphs_become_narrator_lines_and_chapters():
    script = parse_script(import_text(PROSE))
    assert texts(script) == [
        ("Chapter 1", [(None, "It was a dark and stormy night."), (None, "Note: nobody came."),
                       (None, "# not a heading, {not options}, [pause 1s] not a pause, *not emphasis*")]),
        ("CHAPTER TWO: THE END", [(None, "Last words.")]),
    ]
    assert script.lines[1].paragraph  # every paragraph is one


def test_markdown_is_read_line_by_line(tmp_path):
    path = tmp_path / "script.md"
    path.write_text("# One\nAnna: Hi.\nThe wind howled.\nBob: Yes. {speed 0.9}\n", encoding="utf-8")
    script = parse_script(import_file(path))
    assert texts(script) == [("One", [("Anna", "Hi."), (None, "The wind howled."), ("Bob", "Yes.")])]
    assert script.lines[2].options.speed == 0.9


SUBTITLES = """\
1
00:00:01,500 --> 00:00:03,000
<i>Hello</i> there,
general.

2
00:00:03,000 --> 00:00:04,250
{\\an8}No gap before me.

3
00:01:10,000 --> 00:01:12,000
After a long gap.
"""


def test_srt_cues_keep_their_timing():
    script = parse_script(import_srt(SUBTITLES))
    items = script.chapters[0].items
    summary = [(type(i).__name__, getattr(i, "text", None), getattr(i, "seconds", None),
                getattr(getattr(i, "options", None), "duration", None)) for i in items]
    assert summary == [
        ("Pause", None, 1.5, None),
        ("Line", "Hello there, general.", None, 1.5),
        ("Line", "No gap before me.", None, 1.25),
        ("Pause", None, 60.0, None),  # 65.75 s of silence, in pauses of at most 60 s
        ("Pause", None, pytest.approx(5.75), None),
        ("Line", "After a long gap.", None, 2.0),
    ]


def test_bad_srt():
    with pytest.raises(ImportFailed, match="not a readable SRT"):
        import_srt("1\n00:00:01,000 --> nonsense\nHi\n")
    with pytest.raises(ImportFailed, match="no subtitles"):
        import_srt("")


def cues(*times: str) -> str:
    return "".join(f"{i}\n{start} --> {end}\nLine {i}.\n\n" for i, (start, end) in enumerate(times, 1))


def test_srt_times_that_would_make_hours_of_silence_are_refused():
    """A cue at 99:59:59 once made the export allocate 32 GiB after every line had been rendered."""
    with pytest.raises(ImportFailed, match=r"Subtitle 2 starts at 99:59:59,000; the Studio imports subtitles up "
                                           r"to 10 hours long"):
        import_srt(cues(("00:00:01,000", "00:00:02,000"), ("99:59:59,000", "99:59:59,500")))
    with pytest.raises(ImportFailed, match=r"Subtitle 2 starts at 01:00:02,000, 60 minutes after the one before "
                                           r"it; the Studio keeps at most 30 minutes of silence"):
        import_srt(cues(("00:00:01,000", "00:00:02,000"), ("01:00:02,000", "01:00:03,000")))


def test_srt_silence_up_to_the_limits_is_kept():
    script = parse_script(import_srt(cues(("00:00:01,000", "00:00:02,000"), ("00:30:02,000", "00:30:03,000"))))
    pauses = [item.seconds for item in script.chapters[0].items if type(item).__name__ == "Pause"]
    assert sum(pauses) == pytest.approx(1 + 30 * 60)


def make_epub(path, with_opening=True):
    book = epub.EpubBook()
    book.set_identifier("test-book")
    book.set_title("A Test Book")
    book.set_language("en")
    pages = []
    if with_opening:
        cover = epub.EpubHtml(title="Title page", file_name="title.xhtml", lang="en")
        cover.content = "<html><body><p>A Test Book, by Nobody.</p></body></html>"
        pages.append(cover)
    one = epub.EpubHtml(title="The Start", file_name="one.xhtml", lang="en")
    one.content = ("<html><body><h1>The Start</h1><p>First paragraph,\n wrapped.</p>"
                   "<p>Note: <em>second</em> {paragraph}.</p>"
                   "<h2 id='part-b'>Part B</h2><p>Inside part B.</p></body></html>")
    two = epub.EpubHtml(title="The End", file_name="two.xhtml", lang="en")
    two.content = "<html><body><h1>The End</h1><div>Last words.</div><ul><li>A list item.</li></ul></body></html>"
    pages += [one, two]
    for page in pages:
        book.add_item(page)
    book.toc = [(epub.Section("The Start", href="one.xhtml"), [epub.Link("one.xhtml#part-b", "Part B", "b")]),
                epub.Link("two.xhtml", "The End", "end")]
    book.add_item(epub.EpubNcx())
    book.add_item(epub.EpubNav())
    book.spine = pages
    epub.write_epub(str(path), book)
    return path


def test_epub_chapters_follow_the_table_of_contents(tmp_path):
    script = parse_script(import_file(make_epub(tmp_path / "book.epub")))
    assert texts(script) == [
        (None, [(None, "A Test Book, by Nobody.")]),
        ("The Start", [(None, "First paragraph, wrapped."), (None, "Note: second {paragraph}.")]),
        ("Part B", [(None, "Inside part B.")]),
        ("The End", [(None, "Last words."), (None, "A list item.")]),
    ]


@pytest.mark.parametrize("make", [
    lambda p: p.write_bytes(b"not a zip at all"),
    lambda p: zipfile.ZipFile(p, "w").writestr("mimetype", "application/epub+zip"),
    lambda p: zipfile.ZipFile(p, "w").writestr("META-INF/container.xml", "<container><rootfiles>"),
])
def test_broken_epub_is_reported(tmp_path, make):
    path = tmp_path / "broken.epub"
    make(path)
    with pytest.raises(ImportFailed, match="broken.epub"):
        import_file(path)


def test_files_by_suffix(tmp_path):
    (tmp_path / "a.txt").write_bytes("Caf\xe9 au lait.".encode("cp1252"))
    assert parse_script(import_file(tmp_path / "a.txt")).lines[0].text == "Café au lait."
    (tmp_path / "c.srt").write_text(SUBTITLES, encoding="utf-8-sig")
    assert len(parse_script(import_file(tmp_path / "c.srt")).lines) == 3
    (tmp_path / "d.pdf").write_bytes(b"%PDF")
    with pytest.raises(ImportFailed, match="imports .txt"):
        import_file(tmp_path / "d.pdf")
    with pytest.raises(ImportFailed, match="cannot be read"):
        import_file(tmp_path / "missing.txt")


def test_a_cue_of_no_length_gets_the_shortest_duration():
    [line] = parse_script(import_srt(cues(("00:00:01,000", "00:00:01,000")))).lines
    assert line.options.duration == 0.1
