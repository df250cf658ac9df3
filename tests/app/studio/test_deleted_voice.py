"""A saved voice deleted once its lines were rendered: the book stays whole (its lines keep their takes and keys, and
it exports); only a line of that voice still to render is a problem of the script."""
import pytest

from app.studio.parse import parse_script
from app.studio.plan import plan_cues
from app.studio.script import ScriptError

SCRIPT = parse_script("# One\nThe narration.\nAnna: Anna's line.\nCarl: Carl's line.\n\n# Two\nCarl: Carl again.\n")


def test_lines_of_a_deleted_voice_with_takes_are_planned_as_before():
    before = plan_cues(SCRIPT, "Bob", ["Anna", "Bob", "Carl"])
    after = plan_cues(SCRIPT, "Bob", ["Anna"], kept={c.key for c in before})  # Bob and Carl deleted since
    assert [(c.key, c.speaker) for c in after] == [(c.key, c.speaker) for c in before]


def test_a_line_of_a_deleted_voice_without_a_take_is_a_problem():
    before = plan_cues(SCRIPT, "Bob", ["Anna", "Bob", "Carl"])
    with pytest.raises(ScriptError) as carl:
        plan_cues(SCRIPT, "Bob", ["Anna", "Bob"], kept={c.key for c in before[:3]})  # "Carl again" not rendered
    assert [str(p) for p in carl.value.problems] == [
        "line 7: there is no saved voice 'Carl' (save it in the Voices tab, or design it: "
        "[voice Carl = female, low pitch])"]
    with pytest.raises(ScriptError, match="The narrator voice 'Bob' is not a saved voice any more"):
        plan_cues(SCRIPT, "Bob", ["Anna", "Carl"], kept={c.key for c in before[1:]})  # the narration not rendered
