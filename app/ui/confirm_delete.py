"""Delete asks first, on the page: the button shows "Delete 'Anna'? [Delete] [Keep]" below it, and only the
second Delete deletes. (A browser confirm() before the handler could not stop it: the handler reads the
selection from server-side state, which a script's answer cannot change, so one click deleted.)"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import gradio as gr

from .messages import reported


@dataclass(frozen=True)
class DeleteConfirm:
    box: gr.Group
    question: gr.Markdown
    yes: gr.Button
    keep: gr.Button

    def asked(self, what: str) -> tuple[gr.Group, str]:
        """(box, question) updates that ask whether to delete `what`."""
        return gr.Group(visible=True), f"**Delete {what}?** This cannot be undone."

    def wire(self, *, delete: gr.Button, selected: gr.State, details: gr.Group, version: gr.State,
             message: gr.Markdown, describe: Callable[[str], str], remove: Callable[[str], str],
             api_name: str) -> None:
        """`delete` asks about `describe(key)` of the selected key; the box's Delete runs `remove(key)`, which
        deletes and returns the message to show, then clears the selection, hides `details` and bumps `version`;
        Keep hides the box. Nothing happens without a selection."""

        def ask_delete(key):
            if not key:
                return gr.skip(), gr.skip()
            return self.asked(describe(key))

        def do_delete(key, current_version):
            if not key:
                return gr.skip(), gr.skip(), gr.skip(), gr.skip(), hidden()
            done = remove(key)
            return None, gr.Group(visible=False), current_version + 1, done, hidden()

        ask_outputs = [self.box, self.question]
        delete.click(reported(ask_delete, ask_outputs), selected, ask_outputs, api_visibility="private",
                     show_progress="hidden")
        delete_outputs = [selected, details, version, message, self.box]
        self.yes.click(reported(do_delete, delete_outputs), [selected, version], delete_outputs, api_name=api_name,
                       show_progress="hidden")
        self.keep.click(hidden, None, self.box, api_visibility="private", show_progress="hidden")


def delete_confirm(prefix: str) -> DeleteConfirm:
    """The (hidden) question and its two buttons, laid out where this is called; ids start with `prefix`."""
    with gr.Group(visible=False, elem_id=f"{prefix}-confirm", elem_classes="vd-confirm") as box:
        question = gr.Markdown(elem_id=f"{prefix}-confirm-question")
        with gr.Row():
            yes = gr.Button("Delete", variant="stop", size="sm", min_width=90, elem_id=f"{prefix}-delete-confirm")
            keep = gr.Button("Keep", size="sm", min_width=90, elem_id=f"{prefix}-delete-keep")
    return DeleteConfirm(box, question, yes, keep)


def hidden() -> gr.Group:
    return gr.Group(visible=False)
