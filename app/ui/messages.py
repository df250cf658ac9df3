"""What an action has to say appears in one place: a line under the button the user pressed.

A failed action writes its reason there, as plain text (a name it quotes is shown as typed, Markdown marks and
all), leaves every field as the user typed it (no red "Error" badges, no pop-up) and puts back what `reset` names
(an output panel returns to idle). API clients still get the error itself. User mistakes are logged in one line;
anything unexpected with its traceback.
"""
from __future__ import annotations

import functools
import inspect
import logging

import gradio as gr

from engine.errors import VoiceDeskError

from .common import literal

log = logging.getLogger(__name__)


def message_line(elem_id: str) -> gr.Markdown:
    """The line under an action where it reports what happened."""
    return gr.Markdown("", elem_id=elem_id, elem_classes="vd-message")


def reported(fn, outputs: list, reset: dict | None = None):
    """`fn` for an event with these `outputs`, the last of which is its `message_line`.

    `fn` returns (or yields) a value for every output, the message included ("" when there is nothing
    to say). When it raises, the message says why, the outputs in `reset` (component -> value) get
    those values, the others keep theirs. Wire the event with show_progress="hidden".
    """
    reset = reset or {}

    def failure(err: Exception) -> tuple[tuple, gr.Error]:
        if isinstance(err, (VoiceDeskError, gr.Error)):
            text = err.message if isinstance(err, gr.Error) else str(err)
            log.info("%s: %s", fn.__name__, text)
        else:
            log.exception("%s failed", fn.__name__)
            text = f"Something went wrong ({type(err).__name__}: {err}). The app is still running."
        values = tuple(reset.get(o, gr.skip()) for o in outputs[:-1])
        # shown as written: a reason quotes names the user typed ('A voice named '*Ann*' already exists')
        return (*values, f"⚠ {literal(text)}"), gr.Error(text, visible=False, print_exception=False)

    @functools.wraps(fn)
    def run(*args, **kwargs):
        try:
            if inspect.isgeneratorfunction(fn):
                yield from fn(*args, **kwargs)
            else:
                yield fn(*args, **kwargs)
        except Exception as err:
            update, error = failure(err)
            yield update
            raise error from None

    return run
