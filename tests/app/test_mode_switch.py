"""On a CPU both quality modes run the same eager FP32 path: the switch says so, and switching loads
nothing (the running app keeps serving at once instead of reloading the model for no change)."""
from gradio_client import Client

from engine.config import Mode


def test_switching_to_the_same_path_loads_nothing(app_launcher, tmp_path):
    with app_launcher(tmp_path) as app:
        client = Client(app.url, verbose=False)
        client.predict("realtime", api_name="/set_mode")
        status = client.predict(api_name="/model_status")
        assert status["ready"] and status["stage"] == "ready", status  # no "Waiting for the GPU"
        assert status["mode"] == "realtime"  # remembered for the next start all the same
        # a generation queues behind any reload on the one worker: once it is done, a reload would be in the log
        client.submit(text="Still the same model.", steps=4, randomize=False, seed=7, api_name="/design").result()
    assert "realtime mode needs an NVIDIA GPU" not in app.log.read_text()


def test_the_quality_switch_says_what_runs_on_a_cpu(running_app, browser):
    from pages import open_page

    context = browser.new_context(viewport={"width": 1366, "height": 768})
    page = open_page(context, running_app.url)
    switch = page.locator("#vd-mode").inner_text()
    context.close()
    assert "same eager FP32 path on the CPU" in switch and "loads nothing" in switch, switch
    assert "CUDA Graph" not in switch and "FP16" not in switch and "reloads" not in switch, switch


def test_a_gpu_keeps_two_paths():
    import torch

    from engine.lm.modes import runs_as

    cuda, cpu = torch.device("cuda"), torch.device("cpu")
    assert runs_as(Mode.REALTIME, cuda) is Mode.REALTIME and runs_as(Mode.HIFI, cuda) is Mode.HIFI
    assert runs_as(Mode.REALTIME, cpu) is runs_as(Mode.HIFI, cpu) is Mode.EAGER
