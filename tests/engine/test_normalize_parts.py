"""Speaking numbers and dates in parts (normalize.normalized_parts): exactly the whole text's normalisation, the
first part soon, Stop heard while a run goes on; the safe cuts it runs to."""
import json
import logging
import threading
from pathlib import Path

import pytest
from extras import needs_tn

from engine.errors import Cancelled
from engine.text import normalize
from engine.text.normalize import normalize_text, normalized_parts
from engine.text.normalize_cuts import safe_cuts

GOLDENS = Path(__file__).parents[1] / "data" / "goldens" / "text.json"
GOLDEN_CASES = json.loads(GOLDENS.read_text("utf-8"))["normalize"]

# sentences whose numbers, dates, units, abbreviations and initials sit at or next to sentence ends
ENGLISH = [
    "Dr. Smith paid $1,234.56 on 3/14/2025 at 10:30 a.m.!", "He was born in 1990 and is 35 now.",
    "Call 555-0134 or +1 (800) 555-0199.", "It weighs 2.5kg and costs 12% more, i.e. 3x.",
    "The [laughter] 2 cats ate [B EY1 S] 10 fish.", "We met on Dec. 4, 2026 in the morning.",
    "House No. 5 is on the left.", "The value is 3.5 exactly.", "It costs $1,000.50 today.",
    "Meet me at 3:30 p.m. Then we go home.", "Meet at 3 pm. Then leave.", "He ran 5 km. Then he rested.",
    "She lives at 1234 Main Street. Springfield is nice.", "It happened in World War II. Nobody forgot.",
    "The U. S. A. Is big.", "They left on Mon. Tuesday was quiet.", "In 1999. Then in 2000.",
    "Version 2. Then version 3.", "Wow! That was 100% right.", "The year 2026. December came.",
    "She scored 3:2. Great game.", "St. Louis is in Missouri. Go there.", "We need eggs, milk, etc. Then we cook.",
    "From 9:00 to 17:00. Every day.", "I paid $5. Five dollars.", "Born Jan. 1, 2000. Died Feb. 2, 2080.",
    "About 1.5 million people. Huge crowd.", "She is No. One. Everyone knows.", "Apollo 11 landed. Armstrong walked.",
    "The 2nd. The 3rd. The 4th.", "Visit www.example.com. Then sign up.", "Pi is 3.14159. Nice number.",
]
CHINESE = [
    "今天是2025年3月14日，价格是199元。", "温度是-3.5度，湿度80%。", "电话：13812345678，时间10:30。",
    "NI3 HAO3，我有2个苹果[laughter]。", "我有3个苹果！他有4个。", "比分是3:2。真精彩！", "他跑了5公里。然后休息。",
    "现在是下午3点。我们走吧？", "2026年。十二月很冷。", "明天12月4日。后天5日。", "他买了3.5斤苹果。很多。",
]
FILLER = "This sentence has words and nothing else to read. "


def long_text(sentences: list[str], sep: str, rounds: int) -> str:
    """Every sentence after every other, and after some plain text (how a number reads can hang on what went
    before it: 'Apollo 11' is 'eleven' alone and 'one one' after twenty words)."""
    return sep.join(sentences[(i * 7) % len(sentences)] for i in range(rounds * len(sentences))) + sep + \
        FILLER * 5 + sep.join(sentences)


@pytest.fixture
def small_runs(monkeypatch):
    """Runs of a few sentences, so that a short text is read in many runs."""
    monkeypatch.setattr(normalize, "FIRST_RUN_CHARS", 30)
    monkeypatch.setattr(normalize, "RUN_GROWTH", 2)


@needs_tn
@pytest.mark.parametrize(("sentences", "sep", "lang"), [(ENGLISH, " ", "en"), (CHINESE, "", "zh"),
                                                         (CHINESE, "", None), (ENGLISH, " ", "de")],
                         ids=["en", "zh", "auto", "de"])
def test_the_parts_make_exactly_the_whole_texts_normalisation(sentences, sep, lang, small_runs, caplog):
    text = long_text(sentences, sep, rounds=1)
    parts = list(normalized_parts(text, lang))
    assert len(parts) >= 4  # read in several runs
    assert "".join(parts) == normalize_text(text, lang)
    assert "read differently" not in caplog.text


@needs_tn
def test_the_goldens_come_out_the_same_in_parts(small_runs):
    for case in GOLDEN_CASES:
        lang = case["resolved"]  # as test_normalize resolves it
        assert "".join(normalized_parts(case["text"], lang)) == case["normalized"], case["text"]


@needs_tn
def test_normalising_each_part_alone_would_not_be_exact():
    # why every run starts at the text's start: the whole text reads the number after twenty words differently
    text = FILLER * 4 + "Apollo 11 landed."
    cut = safe_cuts(text, "en", held_out=[])[-1]
    alone = normalize_text(text[:cut], "en") + normalize_text(text[cut:], "en")
    assert alone != normalize_text(text, "en") == "".join(normalized_parts(text, "en"))


@needs_tn
@pytest.mark.parametrize(("sentences", "sep", "lang"), [(ENGLISH, " ", "en"), (CHINESE, "", "zh")])
def test_normalising_up_to_any_safe_cut_gives_the_start_of_the_whole(sentences, sep, lang):
    text = FILLER * 5 + sep.join(sentences)  # cut after twenty words and more
    whole = normalize_text(text, lang)
    cuts = safe_cuts(text, lang, held_out=normalize._held_out(text, pinyin=lang == "zh"))
    assert len(cuts) >= 10
    for cut in cuts:
        assert whole.startswith(normalize_text(text[:cut], lang)), text[:cut][-40:]


@needs_tn
def test_a_cut_that_was_not_safe_shows_and_the_rest_is_normalised_from_there(monkeypatch, caplog):
    # planted: a cut after "Dec.", which the whole text reads with what follows ("the fourth of december")
    text = FILLER * 3 + "We met on Dec. 4, 2026 in the morning. " + FILLER * 12
    cut = text.index("Dec.") + 4
    monkeypatch.setattr(normalize, "safe_cuts", lambda text, lang, held_out: [cut])
    monkeypatch.setattr(normalize, "FIRST_RUN_CHARS", cut)
    with caplog.at_level(logging.WARNING):
        spoken = "".join(normalized_parts(text, "en"))
    assert "read differently" in caplog.text
    assert spoken == normalize_text(text[:cut], "en") + normalize_text(text[cut:], "en") != normalize_text(text, "en")


def test_safe_cuts_are_plain_sentence_ends_outside_markup():
    text = "We met on Dec. 4, 2026. Then at No. 5 Main St. Again at 3 p.m. Sure. Fine [He said so. Then] Yes. Ok."
    held_out = normalize._held_out(text, pinyin=False)
    assert safe_cuts(text, "en", held_out=held_out) == [text.index("Sure.") + 5, text.index("Yes.") + 4]
    text = "你好。我有3个。5个人很好！明天[笑。好]见。"
    assert safe_cuts(text, "zh", held_out=normalize._held_out(text, pinyin=True)) == [3, text.index("！") + 1]
    assert safe_cuts("Das ist gut. Dann 5. Ende。好", "de", held_out=[]) == [12]


def fake_grammar(monkeypatch, grammar):
    monkeypatch.setattr(normalize, "_grammar_for", lambda lang: grammar)


def test_the_first_part_comes_before_the_rest_is_read(monkeypatch):
    read = []
    fake_grammar(monkeypatch, lambda s: read.append(len(s)) or s)
    text = FILLER * 200  # 10,000 characters
    parts = normalized_parts(text, "en")
    first = next(parts)
    assert read == [len(first)] and normalize.FIRST_RUN_CHARS <= len(first) < normalize.FIRST_RUN_CHARS + len(FILLER)
    assert "".join([first, *parts]) == text and read[-1] == len(text.strip())
    assert sum(read) <= 4 / 3 * len(text)  # runs growing fourfold, then the whole text: their total is bounded


@pytest.mark.parametrize("sentences", [6, 8, 11])
def test_a_short_texts_first_part_waits_only_for_its_first_run(monkeypatch, sentences):
    # FILLER's sentence ends are cuts (49, 99, 149, ...): the first one past FIRST_RUN_CHARS, 149, lies within
    # FIRST_RUN_SHARE of these 300-550 characters, so the first run stops there; a run to past a quarter of the text
    # used to read it all first (~0.5 s for 400 characters on a 2-core CPU, docs/latency.md)
    read = []
    fake_grammar(monkeypatch, lambda s: read.append(len(s)) or s)
    text = FILLER * sentences
    parts = normalized_parts(text, "en")
    first = next(parts)
    assert read == [3 * len(FILLER) - 1] == [len(first)]  # to the third "read.", its space left for the next run
    assert "".join([first, *parts]) == text and read[-1] == len(text.strip())
    assert sum(read) <= (1 + normalize.FIRST_RUN_SHARE) * len(text)


@pytest.mark.parametrize(("words", "runs"), [(48, 2), (46, 1)], ids=["cut-at-half", "cut-past-half"])
def test_a_first_cut_past_the_share_reads_the_whole_text_at_once(monkeypatch, words, runs):
    read = []
    fake_grammar(monkeypatch, lambda s: read.append(len(s)) or s)
    text = FILLER * 5 + "w" * words  # 298 characters: the first cut, 149, at exactly half; 296: past it
    assert "".join(normalized_parts(text, "en")) == text
    assert read == ([149] if runs == 2 else []) + [len(text)]


def test_only_a_streams_first_run_goes_first_in_the_grammars_processes(monkeypatch):
    firsts = []

    def in_child(text, *, language, pinyin, first, cancel):
        firsts.append(first)
        return text

    monkeypatch.setattr(normalize, "_grammar_for", lambda lang: "english")  # a WeTextProcessing grammar's name
    monkeypatch.setattr(normalize, "normalized_in_child", in_child)
    text = FILLER * 200
    assert "".join(normalized_parts(text, "en")) == text
    assert firsts[0] and len(firsts) > 2 and not any(firsts[1:])
    firsts.clear()
    assert normalize_text(text, "en") == text  # a whole text at once (a render's plan): no short first run
    assert firsts == [False]


def test_stop_is_heard_while_a_run_goes_on(monkeypatch):
    cancel, release, returned = threading.Event(), threading.Event(), threading.Event()

    def slow_grammar(s):
        if len(s) > 200:  # the second run: Stop is pressed while it works
            cancel.set()
            release.wait(60)
            returned.set()
        return s

    fake_grammar(monkeypatch, slow_grammar)
    parts = normalized_parts(FILLER * 200, "en", cancel)
    next(parts)
    try:
        with pytest.raises(Cancelled):
            next(parts)
        assert not returned.is_set()  # heard while the run still went on
    finally:
        release.set()


def test_stop_before_a_run_starts_none(monkeypatch):
    calls = []
    fake_grammar(monkeypatch, lambda s: calls.append(s) or s)
    cancel = threading.Event()
    parts = normalized_parts(FILLER * 200, "en", cancel)
    next(parts)
    cancel.set()
    with pytest.raises(Cancelled):
        next(parts)
    assert len(calls) == 1
