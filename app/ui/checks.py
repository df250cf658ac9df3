"""The Checks accordion: mode, N, retries, thresholds, which checks can run here, model download."""
from __future__ import annotations

import gradio as gr

from engine.checks.policy import CheckPolicy
from engine.checks.verdict import Thresholds

from ..checks import MODES
from ..context import AppContext
from ..settings import RANGES
from .components import shut_accordion
from .messages import message_line, reported
from .state import SettingsView, shown


def build_checks(ctx: AppContext, view: SettingsView, prefix: str) -> None:
    with shut_accordion("Checks: right words, right voice, clean signal", "vd-checks"):
        view.bind("check_mode", gr.Dropdown(
            MODES, value=shown(ctx, "check_mode"), label="Check each line", elem_id=f"{prefix}-check-mode",
            info="best of N renders N takes and keeps the best; retakes render again while a check fails"))
        with gr.Row():
            view.bind("check_candidates", gr.Slider(*RANGES["check_candidates"], value=shown(ctx, "check_candidates"),
                                                    step=1, label="N (best of N)"))
            view.bind("check_retries", gr.Slider(*RANGES["check_retries"], value=shown(ctx, "check_retries"), step=1,
                                                 label="Retakes at most"))
        with gr.Row():
            view.bind("check_max_wer", gr.Slider(*RANGES["check_max_wer"], value=shown(ctx, "check_max_wer"),
                                                 step=0.05, label="Words: most wrong",
                                                 info="word error rate a take may have"))
            view.bind("check_min_similarity", gr.Slider(*RANGES["check_min_similarity"],
                                                        value=shown(ctx, "check_min_similarity"), step=0.01,
                                                        label="Voice: least similarity",
                                                        info="to the reference, 0 to 1"))
        availability = gr.Markdown(availability_text(ctx), elem_classes="vd-hint", elem_id=f"{prefix}-check-models")
        ask = gr.Button("Download the missing models…", size="sm", visible=bool(ctx.checks.missing()),
                        elem_id=f"{prefix}-check-ask")
        confirm = gr.Button("Download", size="sm", variant="primary", visible=False,
                            elem_id=f"{prefix}-check-download")
        message = message_line(f"{prefix}-check-message")
    ask_outputs, download_outputs = [availability, confirm, message], [availability, ask, confirm, message]
    ask.click(reported(_ask(ctx), ask_outputs), None, ask_outputs, api_visibility="private", show_progress="hidden")
    confirm.click(reported(_download(ctx), download_outputs), None, download_outputs, api_visibility="private",
                  concurrency_limit=1, concurrency_id="check-download")


def availability_text(ctx: AppContext) -> str:
    missing = ctx.checks.missing()
    if not missing:
        return "All checks can run: the speech recogniser and the speaker model are on this computer."
    lines = [f"**{name.capitalize()} check off**: {m.repo_id} ({m.purpose}) is not on this computer."
             for name, m in missing.items()]
    return "\n\n".join(lines + ["The signal checks (clipping, pauses, dropouts) always run. "
                                "Models are downloaded only when you ask, and work offline afterwards."])


def _ask(ctx: AppContext):
    def ask():
        missing, total = ctx.checks.plan_download()  # asks the hub for the size; nothing is fetched yet
        names = " and ".join(m.repo_id for m in missing.values())
        return (f"Download {names}: **{total / 1e9:.2f} GB** into the Hugging Face cache?",
                gr.Button(value=f"Download {total / 1e9:.2f} GB", visible=True), "")

    return ask


def _download(ctx: AppContext):
    def download(progress=gr.Progress()):
        ctx.checks.download(lambda fraction, message: progress(fraction, desc=message))
        missing = bool(ctx.checks.missing())
        return availability_text(ctx), gr.Button(visible=missing), gr.Button(visible=False), ""

    return download


def register_checks_api(ctx: AppContext) -> None:
    """/set_checks for API clients: the same settings as the Checks accordion."""
    def set_checks(mode: str = "check", candidates: int = 3, retries: int = 2, max_wer: float = 0.2,
                   min_similarity: float = 0.75) -> dict:
        """Check every generated line from now on (mode: off, check, retake, best_of_n); returns the
        settings and which checks cannot run on this computer, with why."""
        ctx.save_settings(check_mode=mode, check_candidates=int(candidates), check_retries=int(retries),
                          check_max_wer=float(max_wer), check_min_similarity=float(min_similarity))  # checked there
        policy = CheckPolicy(mode, int(candidates), int(retries), Thresholds(float(max_wer), float(min_similarity)))
        return {"mode": policy.mode.value, "candidates": policy.candidates, "retries": policy.retries,
                "max_wer": policy.thresholds.max_wer, "min_similarity": policy.thresholds.min_similarity,
                "unavailable": {name: f"{m.repo_id} is not on this computer"
                                for name, m in ctx.checks.missing().items()}}

    gr.api(set_checks, api_name="set_checks")
