"""Turn .txt, .md, .srt and .epub files into Studio script text.

Plain text and books are prose: each paragraph becomes one narrator line, escaped so that nothing in
it reads as markup. Markdown is the script format itself, read line by line as it is. Each SRT cue
becomes a line whose target duration is the cue's length, with pauses for the gaps between cues. An
EPUB's chapters follow its table of contents (ebooklib reads the book).
"""
from __future__ import annotations

import re
import zipfile
from pathlib import Path

from engine.config import SETTING_RANGES
from engine.errors import VoiceDeskError

from .script import (
    MAX_PAUSE_S,
    Chapter,
    Item,
    Line,
    Options,
    Pause,
    Script,
)
from .write import format_script

MAX_IMPORT_BYTES = 50 * 2**20
MAX_SUBTITLES_S = 10 * 3600.0  # a film or an episode runs far shorter; a longer file's times are wrong
MAX_CUE_GAP_S = 30 * 60.0  # silence between two subtitles
SUFFIXES = (".txt", ".md", ".markdown", ".srt", ".epub")
_CHAPTER_LINE = re.compile(r"^(?:chapter|part|book|prologue|epilogue|preface|introduction)\b.{0,60}$", re.IGNORECASE)
_BLANK_LINES = re.compile(r"\n\s*\n")
_SUBTITLE_MARKUP = re.compile(r"<[^>]+>|\{\\[^}]*\}")  # <i>…</i> and ASS overrides such as {\an8}
_BLOCKS = ("p", "h1", "h2", "h3", "h4", "h5", "h6", "li", "blockquote", "pre", "dt", "dd", "td", "caption",
           "figcaption", "div")


class ImportFailed(VoiceDeskError):
    """A file that cannot be turned into a script."""


def import_file(path: str | Path) -> str:
    """The script text for a .txt, .md, .srt or .epub file."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in SUFFIXES:
        raise ImportFailed(f"{path.name}: the Studio imports {', '.join(SUFFIXES)} files.")
    try:
        size = path.stat().st_size
    except OSError as err:
        raise ImportFailed(f"{path.name} cannot be read ({err.strerror}).") from err
    if size > MAX_IMPORT_BYTES:
        raise ImportFailed(f"{path.name} is {size / 2**20:.0f} MB; the Studio imports files up to "
                           f"{MAX_IMPORT_BYTES // 2**20} MB.")
    if suffix == ".epub":
        return import_epub(path)
    text = _read_text(path)
    if suffix == ".srt":
        return import_srt(text)
    if suffix in (".md", ".markdown"):
        return text  # a script already: each line is one line
    return import_text(text)


def _read_text(path: Path) -> str:
    data = path.read_bytes()
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        return data.decode("cp1252", errors="replace")  # old Windows text files


def import_text(text: str) -> str:
    """Prose: a paragraph per narrator line; a short paragraph such as 'Chapter 3' starts a chapter."""
    chapters: list[Chapter] = []
    title, items = None, []
    for paragraph in _paragraphs(text):
        if _CHAPTER_LINE.match(paragraph):
            if title is not None or items:
                chapters.append(Chapter(title, items=tuple(items)))
            title, items = paragraph, []
        else:
            items.append(Line(0, paragraph, None, Options(), True))
    chapters.append(Chapter(title, items=tuple(items)))
    return format_script(Script(tuple(chapters)))


def _paragraphs(text: str) -> list[str]:
    return [p for block in _BLANK_LINES.split(text.replace("\r\n", "\n")) if (p := _join_lines(block.splitlines()))]


def _join_lines(lines: list[str]) -> str:
    return " ".join(line.strip() for line in lines if line.strip())


def import_srt(text: str) -> str:
    """Each cue a line with its length as the target duration; silence where the subtitles pause."""
    import srt

    try:
        cues = list(srt.parse(text))
    except (srt.SRTParseError, ValueError) as err:
        raise ImportFailed(f"This is not a readable SRT file: {err}") from err
    items: list[Item] = []
    clock = 0.0
    for cue in sorted(cues, key=lambda c: c.start):
        words = _join_lines(_SUBTITLE_MARKUP.sub("", cue.content).splitlines())
        if not words:
            continue
        start, end = cue.start.total_seconds(), cue.end.total_seconds()
        gap = start - clock
        _check_cue_time(cue, start=start, gap=gap)
        while gap > 1e-3:  # long gaps become several pauses
            items.append(Pause(0, min(gap, MAX_PAUSE_S)))
            gap -= MAX_PAUSE_S
        duration = min(max(end - start, 0.1), SETTING_RANGES["duration"][2])
        items.append(Line(0, words, None, Options(duration=round(duration, 3)), not items))
        clock = max(clock, start + duration)
    if not items:
        raise ImportFailed("The SRT file has no subtitles with text.")
    return format_script(Script((Chapter(None, items=tuple(items)),)))


def _check_cue_time(cue, *, start: float, gap: float) -> None:
    """Refuse a cue whose time would make hours of silence (a typo such as 99:59:59 would need 32 GB)."""
    import srt

    when = srt.timedelta_to_srt_timestamp(cue.start)
    if start > MAX_SUBTITLES_S:
        raise ImportFailed(f"Subtitle {cue.index} starts at {when}; the Studio imports subtitles up to "
                           f"{MAX_SUBTITLES_S / 3600:.0f} hours long. Check its time.")
    if gap > MAX_CUE_GAP_S:
        raise ImportFailed(f"Subtitle {cue.index} starts at {when}, {gap / 60:.0f} minutes after the one before it; "
                           f"the Studio keeps at most {MAX_CUE_GAP_S / 60:.0f} minutes of silence between "
                           "subtitles. Check its time.")


def import_epub(path: Path) -> str:
    """Chapters from the book's table of contents, paragraphs as narrator lines."""
    from ebooklib import epub
    from lxml import etree

    try:
        book = epub.read_epub(str(path), options={"ignore_ncx": False})
    except (zipfile.BadZipFile, KeyError, OSError, etree.LxmlError, epub.EpubException, AttributeError,
            IndexError, ValueError) as err:
        raise ImportFailed(f"{path.name} is not a readable EPUB book ({type(err).__name__}: {err}).") from err
    documents = _spine_documents(book)
    if not documents:
        raise ImportFailed(f"{path.name} has no readable chapters.")
    starts = _toc_starts(book, documents)
    chapters = _epub_chapters(documents, starts)
    if not any(chapter.items for chapter in chapters):
        raise ImportFailed(f"{path.name} has no text to read (is it a book of images?).")
    return format_script(Script(tuple(chapters)))


def _spine_documents(book) -> list[tuple[str, list[tuple[str | None, str]]]]:
    """(file name, [(element id or None, paragraph)]) for each readable document, in reading order."""
    from lxml import etree, html

    documents = []
    for idref, linear in book.spine:
        item = book.get_item_with_id(idref)
        if linear in ("no", False):  # a page outside the reading order (a footnote page, say)
            continue
        if item is None or not item.get_name().lower().endswith((".xhtml", ".html", ".htm", ".xml")):
            continue
        try:
            tree = html.fromstring(item.get_content())
        except (etree.LxmlError, ValueError):
            continue
        documents.append((item.get_name(), _blocks(tree)))
    return documents


def _blocks(tree) -> list[tuple[str | None, str]]:
    """The text of each innermost block element, with the nearest id at or before it (anchors for the TOC)."""
    for junk in tree.xpath("//script|//style|//head"):
        junk.drop_tree()
    blocks: list[tuple[str | None, str]] = []
    anchor = None
    for element in tree.iter():
        if not isinstance(element.tag, str):
            continue
        if element.get("id"):
            anchor = element.get("id")
            blocks.append((anchor, ""))
        tag = element.tag.split("}")[-1].lower()
        if tag in _BLOCKS and not any(isinstance(c.tag, str) and c.tag.split("}")[-1].lower() in _BLOCKS
                                      for c in element.iterdescendants()):
            text = " ".join(element.text_content().split())
            if text:
                blocks.append((None, text))
    return blocks


def _toc_starts(book, documents) -> list[tuple[int, int, str]]:
    """(document index, block index, title) where each table-of-contents entry starts, in reading order."""
    index_of = {name: i for i, (name, _) in enumerate(documents)}
    starts = []
    for title, href in _flatten_toc(book.toc):
        name, _, fragment = href.partition("#")
        doc = index_of.get(name)
        if doc is None:
            continue
        blocks = documents[doc][1]
        block = next((i for i, (anchor, _) in enumerate(blocks) if fragment and anchor == fragment), 0)
        starts.append((doc, block, " ".join(title.split()) or f"Chapter {len(starts) + 1}"))
    starts.sort(key=lambda s: (s[0], s[1]))
    return starts or [(i, 0, f"Part {i + 1}") for i in range(len(documents))]


def _flatten_toc(entries) -> list[tuple[str, str]]:
    flat = []
    for entry in entries:
        if isinstance(entry, tuple):  # (Section, [children])
            section, children = entry
            if getattr(section, "href", None):
                flat.append((section.title or "", section.href))
            flat += _flatten_toc(children)
        elif getattr(entry, "href", None):
            flat.append((entry.title or "", entry.href))
    return flat


def _epub_chapters(documents, starts) -> list[Chapter]:
    chapters = []
    positions = [(doc, block) for doc, block, _ in starts]
    opening = _paragraphs_between(documents, (0, 0), positions[0])
    if opening:
        chapters.append(Chapter(None, items=tuple(opening)))
    for i, (doc, block, title) in enumerate(starts):
        end = positions[i + 1] if i + 1 < len(starts) else (len(documents), 0)
        lines = _paragraphs_between(documents, (doc, block), end)
        if lines and lines[0].text.casefold() == title.casefold():
            lines = lines[1:]  # the chapter's own heading
        chapters.append(Chapter(title, items=tuple(lines)))
    return chapters


def _paragraphs_between(documents, start: tuple[int, int], end: tuple[int, int]) -> list[Line]:
    lines = []
    for doc in range(start[0], min(end[0] + 1, len(documents))):
        blocks = documents[doc][1]
        first = start[1] if doc == start[0] else 0
        last = end[1] if doc == end[0] else len(blocks)
        lines += [Line(0, text, None, Options(), True) for _anchor, text in blocks[first:last] if text]
    return lines
