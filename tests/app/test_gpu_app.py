"""The launched app on a GPU, where there is one: the other app tests run it on the CPU (tests/app/served.CPU_ONLY), so
this is the one that sees the page's Clone run on CUDA as a user with an NVIDIA card has it."""
import pytest
import torch
from gradio_client import Client, handle_file

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="the app on a GPU: needs one")

STATUS, METRICS = 1, 3  # of /clone's outputs (tests/app/test_api.py)


def test_the_app_clones_a_voice_on_the_gpu(app_launcher, tmp_path, reference_wav):
    with app_launcher(tmp_path, gpu=True) as app:
        final = Client(app.url, verbose=False).submit(
            reference=handle_file(str(reference_wav)), transcript="A clip of a buzzing voice.",
            text="Spoken on the graphics card. Then a second sentence.", steps=4, randomize=False, seed=7,
            api_name="/clone").result()
    metrics = final[METRICS]
    assert "Done" in final[STATUS] and metrics["audio_s"] > 0, final[STATUS]
    assert "CUDA graphs" in metrics["backend"] and "NVIDIA" in metrics["backend"], metrics["backend"]
