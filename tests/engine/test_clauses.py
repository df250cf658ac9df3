"""The clause policy for text that is still arriving (engine/text/clauses.py): a clause is let go the moment
it is known to be complete, never later, never before, and nothing is lost (but marks glued to an end already
spoken), doubled or reordered."""
import pytest

from engine.text.clauses import ClauseBuffer, ClauseRules
from engine.text.duration import text_weight, weight_per_second

ANSWER = ("Sure, I can help with that. The weather today is sunny, with a high of 21 degrees! "
          "Do you want the forecast for tomorrow? It costs 3.14 dollars, e.g. a coffee.")


def feed(pieces, rules=ClauseRules()):
    """[(piece, clauses it completed)] and the clauses `finish` gave."""
    buffer = ClauseBuffer(rules)
    return [(piece, buffer.add(piece)) for piece in pieces], buffer.finish()


def tokens(text: str, size: int = 3) -> list[str]:
    return [text[i:i + size] for i in range(0, len(text), size)]


def test_a_sentence_is_let_go_when_its_mark_arrives():
    steps, rest = feed(["Hello there", ".", " How", " are you", "?"])
    assert [done for _, done in steps] == [[], ["Hello there."], [], [], ["How are you?"]]
    assert rest == []


def test_token_by_token_every_clause_comes_out_once_in_order_and_as_soon_as_complete():
    buffer = ClauseBuffer()
    received, spoken = "", []
    for piece in tokens(ANSWER):
        received += piece
        done = buffer.add(piece)
        for clause in done:  # each clause is complete: its end has arrived
            end = received.index(clause, len(" ".join(spoken))) + len(clause)
            assert end <= len(received)
        spoken += done
    spoken += buffer.finish()
    assert spoken == ["Sure, I can help with that.", "The weather today is sunny, with a high of 21 degrees!",
                      "Do you want the forecast for tomorrow?", "It costs 3.14 dollars, e.g. a coffee."]
    assert "".join(spoken).replace(" ", "") == ANSWER.replace(" ", "")


@pytest.mark.parametrize("size", [1, 2, 5, 17, len(ANSWER)])
def test_the_pieces_the_text_arrives_in_do_not_change_the_clauses(size):
    buffer = ClauseBuffer()
    clauses = [c for piece in tokens(ANSWER, size) for c in buffer.add(piece)] + buffer.finish()
    assert clauses == ClauseBuffer().add(ANSWER)


def test_a_full_stop_inside_a_number_or_after_an_abbreviation_is_no_end():
    steps, rest = feed(["It costs 3", ".", "14 dollars. Ask Dr", ". Smith", " now."])
    assert [done for _, done in steps] == [[], [], ["It costs 3.14 dollars."], [], ["Ask Dr. Smith now."]]
    assert rest == []


@pytest.mark.parametrize("pieces, clauses", [
    (["It costs 3", ".", "5 dollars."], ["It costs 3.5 dollars."]),  # a number's point
    (["It is 3.", "5 km."], ["It is 3.5 km."]),
    (["It costs 12", ".", "50 dollars."], ["It costs 12.50 dollars."]),
    (["Bring fruit, e.", "g. apples."], ["Bring fruit, e.g. apples."]),  # a dotted abbreviation being written
    (["Bring fruit, e.g", ". apples."], ["Bring fruit, e.g. apples."]),
    (["The sign says 'p.", "m.' Go."], ["The sign says 'p.m.'", "Go."]),  # a letter after a quote's opener
    (["Bring fruit—e.", "g. apples."], ["Bring fruit—e.g. apples."]),  # a letter after a dash, an ellipsis
    (["Bring fruit (e.", "g. apples)."], ["Bring fruit (e.g. apples)."]),
    (["It is in the…U.", "S. Yes."], ["It is in the…U.S.", "Yes."]),
    (["We open at 9 a.", "m. Sharp."], ["We open at 9 a.m.", "Sharp."]),
    (["It is in the U.", "S. Yes."], ["It is in the U.S.", "Yes."]),  # "U." may become "U.S." (a space: an end)
    (["Made in the U.S", ".", "A. Yes."], ["Made in the U.S.A.", "Yes."]),
    (["Ask Dr.", " Who."], ["Ask Dr. Who."]),  # an abbreviation is no end at all
])
def test_a_full_stop_that_may_go_on_waits_for_what_follows(pieces, clauses):
    steps, rest = feed(pieces)
    assert [done for _, done in steps][:-1] == [[]] * (len(pieces) - 1)
    assert [c for _, done in steps for c in done] + rest == clauses


@pytest.mark.parametrize("text", ["I don't.", "यह मेरी किताब.", "Up 3%.", "It was—yes."])
def test_a_full_stop_after_a_whole_word_ends_at_once(text):
    """A word is what precedes the mark back to a space, dash, ...: with its apostrophes and combining marks
    ("किताब", not its last letter "ब"), so it is no single letter that may become an abbreviation."""
    assert ClauseBuffer().add(text) == [text]


@pytest.mark.parametrize("pieces", [
    ['He said "Wait', "!"],  # a quote opened and not closed: its closer may follow the mark
    ["He said “wait", "!"],
    ["(See the note", "."],
    ["「好", "。"][:1] + ["。"],
])
def test_a_mark_inside_an_open_quote_or_bracket_waits(pieces):
    buffer = ClauseBuffer()
    assert [c for piece in pieces for c in buffer.add(piece)] == []


def test_closing_quotes_stay_with_their_sentence_and_marks_glued_to_an_early_end_are_dropped():
    steps, rest = feed(['He said "Wait', "!", '"', " Then", "?", "!", " Ok", ".", '"', "..", " Go", "!"])
    assert [done for _, done in steps] == [[], [], ['He said "Wait!"'], [], ["Then?"], [], [], ["Ok."], [], [], [],
                                           ["Go!"]]
    assert rest == []  # "!" glued to "Then?" and '"..' to "Ok." said nothing


def test_marks_glued_to_an_early_end_wait_until_something_else_comes():
    buffer = ClauseBuffer()
    assert buffer.add("Really?") == ["Really?"]
    assert buffer.add("!") == [] and buffer.add(")") == [] and buffer.waiting == "!)"
    assert buffer.finish() == []  # they were all that came: nothing to say
    text_after = ClauseBuffer()
    assert text_after.add("See example.") == ["See example."]
    assert text_after.add("com now.") == ["com now."]  # a wrong end (rare: ".com" is one token): nothing lost
    opener = ClauseBuffer()
    assert opener.add("He left.") == ["He left."]
    assert opener.add('"Where is it') == []  # a quote glued to a following word opens the next sentence
    assert opener.finish() == ['"Where is it']


def test_other_scripts_end_at_their_own_marks():
    steps, rest = feed(["你好", "。", "今天天气很好", "！", "再见", "？"])
    assert [done for _, done in steps] == [[], ["你好。"], [], ["今天天气很好！"], [], ["再见？"]]
    assert rest == []
    steps, rest = feed(["「今天天气很好", "！", "」", "再见"])
    assert [c for _, done in steps for c in done] == ["「今天天气很好！」"] and rest == ["再见"]
    steps, rest = feed(["नमस्ते", "।", " आप कैसे हैं", "?"])
    assert [done for _, done in steps] == [[], ["नमस्ते।"], [], ["आप कैसे हैं?"]] and rest == []
    steps, rest = feed(["هل أنت بخير", "؟"])
    assert steps[1][1] == ["هل أنت بخير؟"]


def test_a_line_break_ends_a_clause_and_a_list_number_joins_its_item():
    steps, rest = feed(["Here is the list:", "\n", "1.", " Milk", "\n", "2. Eggs"])
    assert [c for _, done in steps for c in done] == ["Here is the list:", "1. Milk"]
    assert rest == ["2. Eggs"]


def test_only_the_first_clause_may_end_at_a_comma_and_only_when_long_enough():
    rules = ClauseRules(min_first_s=1.0)
    short, rest = feed(["Well, ", "I think so. And then, ", "later, we go"], rules)
    assert [c for _, done in short for c in done] == ["Well, I think so."]  # "Well," is under a second
    assert rest == ["And then, later, we go"]  # later clauses wait for a sentence end
    first = "The weather for tomorrow,"
    assert text_weight(first) >= weight_per_second()
    steps, _ = feed([first, " sunny"], rules)
    assert steps[1][1] == [first]


def test_the_first_comma_threshold_is_inclusive():
    first = "The weather for tomorrow,"
    exact = ClauseRules(min_first_s=text_weight(first) / weight_per_second())
    assert feed([first, " x"], exact)[0][1][1] == [first]
    above = ClauseRules(min_first_s=text_weight(first) / weight_per_second() * 1.001)
    assert feed([first, " x"], above)[0][1][1] == []


def test_enough_words_without_an_end_are_spoken_cut_at_the_last_good_place():
    rules = ClauseRules(max_wait_s=3.0)
    limit = 3.0 * weight_per_second()
    words = "one two three four five six seven eight nine ten eleven twelve thirteen".split()
    buffer, spoken, received = ClauseBuffer(rules), [], ""
    for word in words:
        received += word + " "
        done = buffer.add(word + " ")
        if text_weight(received.strip()) <= limit:
            assert done == [], received  # it waits while there is not yet enough
        spoken += done
        received = buffer.waiting
    spoken += buffer.finish()
    assert " ".join(spoken).split() == words and len(spoken) >= 2
    assert all(text_weight(c) <= limit for c in spoken[:-1])


def test_a_long_clause_cut_prefers_a_comma_to_a_word_gap():
    rules = ClauseRules(min_first_s=100.0, max_wait_s=3.0)
    text = "alpha beta gamma, delta epsilon zeta eta theta iota kappa lambda"
    buffer = ClauseBuffer(rules)
    assert buffer.add(text) == ["alpha beta gamma,"]


def test_text_without_spaces_is_cut_between_characters_when_it_waits_too_long():
    rules = ClauseRules(max_wait_s=2.0)
    buffer = ClauseBuffer(rules)
    spoken = [c for ch in "天" * 40 for c in buffer.add(ch)] + buffer.finish()
    assert "".join(spoken) == "天" * 40 and len(spoken) > 1


def test_finish_counts_every_end_and_whitespace_alone_is_no_clause():
    buffer = ClauseBuffer()
    assert buffer.add("It is 3.") == []
    assert buffer.finish() == ["It is 3."]
    assert ClauseBuffer().finish() == []
    whitespace = ClauseBuffer()
    assert whitespace.add("  \n ") == [] and whitespace.finish() == []


def test_finish_speaks_several_sentences_as_several_clauses():
    buffer = ClauseBuffer()
    buffer.add("First one. Second one")
    assert buffer.finish() == ["Second one"]
    buffer = ClauseBuffer()
    assert buffer.add("A b. C is 3.") == ["A b."]
    assert buffer.finish() == ["C is 3."]


def test_text_exactly_at_the_longest_wait_still_waits_for_its_last_word():
    """The cut comes once the waiting text is heavier than `max_wait_s`: at exactly the limit the whole text would
    be let go, its last word too, which may still go on ('thr' -> 'three')."""
    text = "one two thr"
    rules = ClauseRules(max_wait_s=text_weight(text) / weight_per_second())
    assert rules.max_wait_s * weight_per_second() == text_weight(text)  # exactly at the limit
    buffer = ClauseBuffer(rules)
    assert buffer.add(text) == []
    assert buffer.add("ee") == ["one two"] and buffer.finish() == ["three"]


def test_a_long_wait_is_not_cut_at_a_mark_that_leaves_a_tiny_clause():
    """After the first clause, a comma right at the start ('So,') is no place for the cut of a long wait: the clause
    it makes would be a fraction of a second; the cut takes the last word gap that fits instead."""
    rules = ClauseRules(min_first_s=100.0, max_wait_s=3.0)
    buffer = ClauseBuffer(rules)
    done = buffer.add("Fine. So, alpha beta gamma delta epsilon zeta eta theta iota")
    assert done == ["Fine.", "So, alpha beta gamma delta epsilon zeta eta theta"]
    assert buffer.finish() == ["iota"]


def test_after_finish_nothing_waits():
    """What `finish` gave is let go: it neither waits nor comes out a second time."""
    buffer = ClauseBuffer()
    assert buffer.add("One. Two") == ["One."]
    assert buffer.finish() == ["Two"]
    assert buffer.waiting == "" and buffer.finish() == []
