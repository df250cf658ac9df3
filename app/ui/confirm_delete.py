"""Delete asks first, on the page: the button shows "Delete 'Anna'? [Delete] [Keep]" below it, and only the
second Delete deletes. (A browser confirm() before the handler could not stop it: the handler reads the
selection from server-side state, which a script's answer cannot change, so one click deleted.)"""
from __future__ import annotations

from dataclasses import dataclass

import gradio as gr


@dataclass(frozen=True)
class DeleteConfirm:
    box: gr.Group
    question: gr.Markdown
    yes: gr.Button
    keep: gr.Button

    def asked(self, what: str) -> tuple[gr.Group, str]:
        """(box, question) updates that ask whether to delete `what`."""
        return gr.Group(visible=True), f"**Delete {what}?** This cannot be undone."

    def wire_keep(self) -> None:
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
