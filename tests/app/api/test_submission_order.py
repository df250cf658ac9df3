"""Requests that wait for the GPU start in the order they were made (issue: under load they finished out
of order). Lanes are the one deliberate exception (a burst of API requests takes turns with the page, see
test_curl); here every request is the first of its lane, so the order must be the order of asking.
A request of two GPU jobs (a clone from a new clip: make the voice, then speak) keeps its turn
between them: test_worker shows it without the race of asking from outside. While its voice waits, the clone says
where it stands in line."""
import time

from busy_worker import BusyWorker
from gradio_client import Client, handle_file

FAST = {"steps": 4, "randomize": False, "seed": 5}


def wait_until_waiting(job) -> None:
    """Until the app says the job waits for the GPU (it reached the worker's line)."""
    deadline = time.monotonic() + 120
    while "Waiting in line" not in str(job.outputs()):
        assert time.monotonic() < deadline and not job.done(), job.outputs()
        time.sleep(0.1)


def test_waiting_requests_start_in_the_order_they_were_made(running_app, reference_wav):
    texts = [f"Request {n} of the line, asked in this order." for n in ("one", "two", "three", "four")]
    clients = [Client(running_app.url, verbose=False) for _ in texts]  # four people, four lanes
    slug = clients[0].predict(name="Voice Of The Line", reference=handle_file(str(reference_wav)),
                              transcript="A buzzing clip.", api_name="/save_voice")[0]["value"]
    with BusyWorker(running_app.url) as busy:
        jobs = []
        for n, (client, text) in enumerate(zip(clients, texts)):
            if n % 2:
                job = client.submit(voice_slug=slug, reference=None, transcript="", text=text, **FAST,
                                    api_name="/clone")
            else:
                job = client.submit(text=text, gender="male", **FAST, api_name="/design")
            wait_until_waiting(job)  # in the GPU's line before the next person asks
            jobs.append(job)
        assert busy.running, "the long request ended early: no line formed"
    for job in jobs:
        job.result(timeout=600)
    # when the GPU began each (the history stores an entry when its handler is done, which can be later)
    started = sorted((e["started"], e["text"]) for e in clients[0].predict(api_name="/list_history")
                     if e["text"] in texts)
    assert [text for _, text in started] == texts


def test_a_voice_waiting_in_line_shows_its_place(running_app, reference_wav):
    """A clone from a new clip first makes its voice on the GPU: while that waits, the page says where it
    stands in line, not only "Preparing the voice…" (and with a transcript no other test uses, the voice is
    not in the app's cache)."""
    client = Client(running_app.url, verbose=False)
    with BusyWorker(running_app.url) as busy:
        job = client.submit(reference=handle_file(str(reference_wav)), transcript="A buzzing clip that waits in line.",
                            text="Spoken once the voice is made.", **FAST, api_name="/clone")
        deadline = time.monotonic() + 120
        while not any("Preparing the voice… Waiting in line: 2nd" in str(outputs) for outputs in job.outputs()):
            assert time.monotonic() < deadline and not job.done(), job.outputs()
            time.sleep(0.1)
        assert busy.running, "the long request ended early: no line formed"
    assert "Done" in job.result(timeout=600)[1]
