"""The API tab: switch the OpenAI-compatible API on or off, see its address, copy a working example."""
from __future__ import annotations

from collections.abc import Callable

import gradio as gr

from ..api.access import KEY_ENV, bind_refusal
from ..context import AppContext


def python_example(base_url: str, voice: str, keyed: bool) -> str:
    key = f'os.environ["{KEY_ENV}"]' if keyed else '"not-needed"'
    imports = "import os\n\n" if keyed else ""
    return (f"{imports}from openai import OpenAI\n\n"
            f'client = OpenAI(base_url="{base_url}", api_key={key})\n'
            "with client.audio.speech.with_streaming_response.create(\n"
            f'        model="tts-1", voice="{voice}", input="Hello from VoiceDesk.") as response:\n'
            '    response.stream_to_file("hello.mp3")  # audio arrives while later sentences are made\n')


def curl_example(base_url: str, voice: str, keyed: bool) -> str:
    auth = f' \\\n  -H "Authorization: Bearer ${KEY_ENV}"' if keyed else ""
    return (f"curl -N {base_url}/audio/speech{auth} \\\n  -H 'Content-Type: application/json' \\\n"
            f"  -d '{{\"model\": \"tts-1\", \"voice\": \"{voice}\", \"input\": \"Hello from VoiceDesk.\", "
            "\"response_format\": \"opus\"}' -o hello.opus\n")


def build_api_tab(ctx: AppContext) -> tuple[Callable, list[gr.components.Component]]:
    """Returns the function that fills the tab for the page's own address, and its outputs (for page load)."""
    access = ctx.api
    gr.Markdown("Chat front-ends, readers, agents and scripts that speak OpenAI's audio API can use the voices "
                "here. Requests wait their turn with yours on the GPU and appear in the History, marked "
                "*via API*. `model` may be any of `tts-1`, `tts-1-hd`, `gpt-4o-mini-tts`, `omnivoice`; `voice` "
                "is a saved voice's name or one of OpenAI's names (alloy, echo, nova, ...: designed voices).",
                elem_classes="vd-hint")
    enabled = gr.Checkbox(access.enabled(ctx.settings), label="Serve the API", elem_id="api-enabled",
                          interactive=not access.forced_on,
                          info="started with --api or as `serve`: always on" if access.forced_on else
                          "also reachable by other programs on this computer")
    status = gr.Markdown(elem_id="api-status")
    python = gr.Code(language="python", label="Python (pip install openai)", interactive=False,
                     elem_id="api-python", buttons=["copy"])
    curl = gr.Code(language="shell", label="curl", interactive=False, elem_id="api-curl", buttons=["copy"])

    def show(request: gr.Request):
        base_url = f"http://{request.headers.get('host', '127.0.0.1')}/v1"
        entries = ctx.library.entries()
        voice = entries[0].name if entries else "alloy"
        keyed = access.key is not None
        on = access.enabled(ctx.settings)
        state = f"**On** at `{base_url}`" if on else "**Off**: switch it on to serve `{base_url}`"
        key_note = f" · clients must send the API key (`${KEY_ENV}`)" if keyed else ""
        return (gr.Checkbox(value=on), f"{state}{key_note}", python_example(base_url, voice, keyed),
                curl_example(base_url, voice, keyed))

    def switch(on: bool, request: gr.Request):
        refusal = bind_refusal(ctx.bind_host, access.key) if on else None
        if refusal:
            gr.Warning(refusal)
        else:
            ctx.save_settings(api=on)
        return show(request)

    enabled.input(switch, enabled, [enabled, status, python, curl], api_visibility="private")
    return show, [enabled, status, python, curl]
