"""messages.reported: what a failed action writes in its message line."""
import gradio as gr
import pytest

from app.library import LibraryError
from app.ui.messages import reported


def test_a_reason_is_shown_as_written():
    """A reason quoting a name the user typed was written into the Markdown line as it came: a voice named
    '*Ann* <b>' showed in italics, and '<b>' vanished."""
    def rename(name):
        raise LibraryError(f"A voice named '{name}' already exists: pick another name.")
        yield

    run = reported(rename, ["name box", "message"])
    shown = []
    with pytest.raises(gr.Error) as refused:
        for update in run("*Ann* <b>"):
            shown.append(update)
    assert shown[-1][1] == r"⚠ A voice named '\*Ann\* &lt;b&gt;' already exists: pick another name."
    assert refused.value.message == "A voice named '*Ann* <b>' already exists: pick another name."  # the API's
