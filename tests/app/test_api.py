"""The launched app through its HTTP API (gradio_client), on the tiny random checkpoint."""
import re
import subprocess
import sys
import time

import httpx
import pytest
import soundfile as sf
from gradio_client import Client, handle_file
from gradio_client.exceptions import AppError

from engine.audio.asr import asr_available

FAST = {"steps": 4, "randomize": False, "seed": 7}
THREE_SENTENCES = "First a short clause, then more. The second sentence follows here. And a third one ends it!"
# outputs of /clone: audio, status, metrics html, metrics json, download links, checks html, checks json,
# transcript, seed, message
STATUS, METRICS, CHECKS, SEED = 1, 3, 6, 8


@pytest.fixture
def client(running_app):
    return Client(running_app.url, verbose=False)


def clone(client, reference, text, **settings):
    return client.submit(reference=handle_file(str(reference)), transcript="A clip of a buzzing voice.", text=text,
                         **{**FAST, **settings}, api_name="/clone")


def timed_outputs(job):
    """(seconds since submit, outputs) for every update the app streamed."""
    start, seen = time.monotonic(), []
    for outputs in job:
        seen.append((time.monotonic() - start, outputs))
    return seen


def download(running_app, entry_id, fmt, tmp_path):
    response = httpx.get(f"{running_app.url}/download/history/{entry_id}.{fmt}")
    assert response.status_code == 200, response.text
    path = tmp_path / f"result.{fmt}"
    path.write_bytes(response.content)
    return path


def test_clone_streams_chunks_before_the_end_with_consistent_metrics(running_app, client, reference_wav, tmp_path):
    updates = timed_outputs(clone(client, reference_wav, THREE_SENTENCES, steps=16))
    chunk_times = [t for t, out in updates if "Generating" in str(out[STATUS])]
    assert len(chunk_times) >= 2, [out[STATUS] for _, out in updates]
    finished_at, final = updates[-1]
    assert "Done" in final[STATUS]

    metrics = final[METRICS]
    assert metrics["chunks"] == len(chunk_times) and metrics["demo"] is True and metrics["backend"]
    assert 0 < metrics["first_audio_s"] < metrics["elapsed_s"]
    # The first audio reached the client while the rest was still being generated, not in one burst at the end.
    assert finished_at - chunk_times[0] >= 0.5 * (metrics["elapsed_s"] - metrics["first_audio_s"])
    assert metrics["rtf"] == pytest.approx(metrics["elapsed_s"] / metrics["audio_s"], rel=1e-9)
    assert metrics["seed"] == 7 and any(out[SEED] == 7 for _, out in updates)

    wav = sf.info(download(running_app, metrics["history_id"], "wav", tmp_path))
    assert (wav.samplerate, wav.channels, wav.format) == (24000, 1, "WAV")
    assert wav.frames / 24000 == pytest.approx(metrics["audio_s"], abs=1e-3)
    flac = sf.info(download(running_app, metrics["history_id"], "flac", tmp_path))
    assert flac.format == "FLAC" and flac.frames == wav.frames


def test_history_records_each_result(client, reference_wav):
    text = "History should remember this exact sentence."
    final = clone(client, reference_wav, text).result()
    entry = client.predict(api_name="/list_history")[0]
    assert entry["text"] == text and entry["voice"] == "reference clip" and entry["seed"] == 7
    assert entry["rtf"] == pytest.approx(final[METRICS]["rtf"])


def test_save_a_voice_then_speak_with_it(client, reference_wav):
    saved = client.predict(name="Buzzy Test Voice", reference=handle_file(str(reference_wav)),
                           transcript="A clip of a buzzing voice.", api_name="/save_voice")
    slug = saved[0]["value"]
    voices = {v["slug"]: v for v in client.predict(api_name="/list_voices")}
    assert voices[slug]["name"] == "Buzzy Test Voice" and voices[slug]["seconds"] > 1

    final = client.submit(voice_slug=slug, reference=None, transcript="", text="Speaking with a saved voice.",
                          **FAST, api_name="/clone").result()
    assert "Done" in final[STATUS]
    assert client.predict(api_name="/list_history")[0]["voice"] == "Buzzy Test Voice"

    with pytest.raises(AppError, match="already exists"):
        client.predict(name="buzzy test voice", reference=handle_file(str(reference_wav)), transcript="x",
                       api_name="/save_voice")


def test_a_voice_saved_later_works_in_a_session_opened_before(running_app, client, reference_wav):
    early = Client(running_app.url, verbose=False)  # its view of the voice list predates the save
    saved = client.predict(name="Saved Later", reference=handle_file(str(reference_wav)),
                           transcript="A clip of a buzzing voice.", api_name="/save_voice")
    final = early.submit(voice_slug=saved[0]["value"], reference=None, transcript="", text="Speaking later.",
                         **FAST, api_name="/clone").result()
    assert "Done" in final[STATUS]
    with pytest.raises(AppError, match="There is no saved voice 'nobody'"):
        early.predict(voice_slug="nobody", reference=None, transcript="", text="Hi.", **FAST, api_name="/clone")


def test_voice_design_generates(client):
    final = client.submit(text="A designed voice speaks.", gender="female", pitch="low pitch", **FAST,
                          api_name="/design").result()
    assert "Done" in final[STATUS]
    assert client.predict(api_name="/list_history")[0]["voice"] == "designed: female, low pitch"


@pytest.mark.parametrize("case, message", [
    ("corrupt", "could not be read as audio"),
    ("empty_text", "Type the text"),
    ("url", "web addresses"),
    ("no_clip", "reference clip"),
    ("no_transcript", "Type what is said"),
])
def test_bad_input_gives_a_readable_error(client, reference_wav, tmp_path, case, message):
    if case == "no_transcript" and asr_available():
        pytest.skip("Whisper weights are on this machine: an empty transcript is filled in")
    corrupt = tmp_path / "corrupt.wav"
    corrupt.write_bytes(b"RIFF\x00\x00\x00\x00WAVEjunk" * 100)
    reference, text = {
        "corrupt": (handle_file(str(corrupt)), "Hello."),
        "empty_text": (handle_file(str(reference_wav)), "   "),
        "url": (handle_file("https://example.com/voice.wav"), "Hello."),
        "no_clip": (None, "Hello."),
        "no_transcript": (handle_file(str(reference_wav)), "Hello."),
    }[case]
    with pytest.raises(AppError, match=message):
        client.predict(reference=reference, transcript="", text=text, **FAST, api_name="/clone")


def test_text_limits_hold_on_the_server_for_every_text_input(client, reference_wav):
    """The page's counters stop typing at the limit; an API client must be stopped by the server."""
    too_long = "word " * 10_000 + "!"  # 50,001 characters
    with pytest.raises(AppError, match="the limit is 50,000"):
        client.predict(reference=handle_file(str(reference_wav)), transcript="A clip.", text=too_long, **FAST,
                       api_name="/clone")
    with pytest.raises(AppError, match="the limit is 50,000"):
        client.predict(text=too_long, **FAST, api_name="/design")
    with pytest.raises(AppError, match="transcript is 2,001 characters long; the limit is 2,000"):
        client.predict(reference=handle_file(str(reference_wav)), transcript="x" * 2001, text="Hello.", **FAST,
                       api_name="/clone")
    with pytest.raises(AppError, match="transcript is 2,001 characters long"):
        client.predict(name="Too long", reference=handle_file(str(reference_wav)), transcript="x" * 2001,
                       api_name="/save_voice")


def test_oversized_upload_is_refused(running_app, tmp_path, client, reference_wav):
    big = tmp_path / "big.wav"
    big.write_bytes(b"RIFF" + b"\x00" * (26 * 2**20))
    with big.open("rb") as f:
        response = httpx.post(f"{running_app.url}/gradio_api/upload", files={"files": ("big.wav", f, "audio/wav")},
                              timeout=60)
    assert response.status_code == 413 and "maximum" in response.text
    assert "Done" in clone(client, reference_wav, "Still working after a refused upload.").result()[STATUS]


def test_concurrent_requests_queue_and_all_finish(running_app, reference_wav):
    """The first two run side by side (same settings: the engine batches them); the third, of other steps,
    cannot join them and waits in line."""
    clients = [Client(running_app.url, verbose=False) for _ in range(3)]
    texts = [" ".join([f"Request number {i}."] + ["It goes on long enough to overlap the others."] * 4)
             for i in range(3)]
    jobs = [clone(c, reference_wav, text, **({"steps": 5} if i == 2 else {}))
            for i, (c, text) in enumerate(zip(clients, texts))]
    results = [timed_outputs(job) for job in jobs]
    for updates in results:
        assert "Done" in updates[-1][1][STATUS]
    statuses = [str(out[STATUS]) for updates in results for _, out in updates]
    assert any("Waiting in line" in s for s in statuses), "nobody had to wait: the requests did not overlap"
    stored = [e["text"] for e in clients[0].predict(api_name="/list_history")[:3]]
    assert sorted(stored) == texts


ABANDONING_CLIENT = """
import sys
from gradio_client import Client
job = Client(sys.argv[1], verbose=False).submit(text=sys.argv[2], steps=4, randomize=False, seed=5, api_name="/design")
for outputs in job:
    if "Generating" in str(outputs[1]):
        print("generating", flush=True)
        break
input()  # until killed
"""


def test_a_client_that_goes_away_leaves_no_job_running(running_app, client):
    text = "An abandoned request that would go on for minutes. " * 60
    earlier = len(running_app.log.read_text())
    gone = subprocess.Popen([sys.executable, "-c", ABANDONING_CLIENT, running_app.url, text], stdout=subprocess.PIPE,
                            stdin=subprocess.PIPE, text=True)
    assert gone.stdout.readline().strip() == "generating"
    gone.kill()  # its connection drops, as when a browser tab is closed
    gone.wait()
    final = client.submit(text="Right after a client went away.", **FAST, api_name="/design").result()
    assert "Done" in final[STATUS]
    assert running_app.logs("a client went away: its generation was stopped", since=earlier)  # found, stopped
    assert text not in [entry["text"] for entry in client.predict(api_name="/list_history")]


def test_only_the_apps_own_files_are_served(running_app, client, reference_wav):
    clone(client, reference_wav, "A result to fetch over HTTP.").result()
    newest = client.predict(api_name="/list_history")[0]["file"]
    home, get = running_app.home, lambda path: httpx.get(f"{running_app.url}/gradio_api/file={path}")
    assert get(home / "data" / "history" / "audio" / newest).status_code == 200
    for private in ("/etc/passwd", home / "config" / "settings.json", home / "app.log",
                    next((home / "data" / "voices").rglob("voice.json"), home / "data" / "voices"),
                    home / "data" / "history" / "index.jsonl"):
        assert get(private).status_code in (403, 404), private
    assert httpx.get(f"{running_app.url}/monitoring").status_code in (403, 404)
    assert httpx.get(f"{running_app.url}/gradio_api/mcp/schema").status_code == 404


def switch_mode(client, mode) -> dict:
    client.predict(mode, api_name="/set_mode")
    deadline = time.monotonic() + 120
    while not (status := client.predict(api_name="/model_status"))["ready"]:
        assert status["stage"] != "failed" and time.monotonic() < deadline, status
        time.sleep(0.5)
    return status


def test_switching_quality_mode_reloads_the_model(client, reference_wav):
    status = switch_mode(client, "realtime")
    assert status["mode"] == "realtime" and status["message"]  # the backend this machine runs
    final = clone(client, reference_wav, "Speaking after a mode switch.").result()
    assert "Done" in final[STATUS] and final[METRICS]["mode"] == "Realtime"
    assert switch_mode(client, "hifi")["mode"] == "hifi"


def test_best_of_n_scores_reach_api_clients_and_the_history(client, reference_wav):
    """Checks on: every streamed update carries the scores so far; the kept take of each part is the
    best of N; the history keeps them. Without the real models only the signal checks run."""
    settings = client.predict("best_of_n", 2, 2, 0.2, 0.75, api_name="/set_checks")
    try:
        assert settings["mode"] == "best_of_n" and settings["candidates"] == 2
        updates = [out for _, out in timed_outputs(clone(client, reference_wav, THREE_SENTENCES))]
        final = updates[-1][CHECKS]
        parts = sum("Generating" in str(out[STATUS]) for out in updates)
        assert final["mode"] == "best_of_n" and len(final["parts"]) == parts >= 2
        for part in final["parts"]:
            assert part["attempts"] == 2 and {"clipping", "pauses", "dropouts"} <= set(part["checks"])
            assert part["badge"] and part["passed"] == all(c["passed"] for c in part["checks"].values())
        assert set(final["skipped"]) == set(settings["unavailable"])
        assert [len(out[CHECKS]["parts"]) for out in updates if isinstance(out[CHECKS], dict)][:2] == [1, 2]
        assert client.predict(api_name="/list_history")[0]["checks"] == final
    finally:
        client.predict("off", api_name="/set_checks")
    plain = clone(client, reference_wav, "Unchecked.").result()
    assert plain[CHECKS] is None and client.predict(api_name="/list_history")[0]["checks"] is None


@pytest.mark.parametrize("args, said", [
    (("best_of_n", 100, 2, 0.2, 0.75), "check_candidates = 100 is not valid: use a whole number from 2 to 8."),
    (("bogus", 2, 2, 0.2, 0.75), "check_mode = 'bogus' is not valid: use one of off, check, retake, best_of_n."),
])
def test_set_checks_refuses_values_out_of_their_range(client, running_app, args, said):
    """A hundred candidates per line (or a mode with no meaning) is said back to the client, not saved for every
    later generation (it was, until the next start reset it)."""
    before = (running_app.home / "config" / "settings.json").read_text()
    with pytest.raises(AppError, match=re.escape(said)):
        client.predict(*args, api_name="/set_checks")
    assert (running_app.home / "config" / "settings.json").read_text() == before
