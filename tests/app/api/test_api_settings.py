"""The OpenAI-compatible API follows the app's "Silence around", "Fade" and "Speak numbers and dates"
settings, and `normalize` in a request overrides the last one. Two launched apps with different saved
settings answer the same seeded request; what differs must be exactly what the settings say."""
import json

import numpy as np
import openai
import pytest

from engine.text.normalize import normalize_available

RATE = 24000
REQUEST = {"model": "tts-1", "voice": "alloy", "response_format": "pcm", "extra_body": {"steps": 4, "seed": 11}}
EDGES = "A sentence long enough to have a middle between its two edges."  # one piece: no clause to split off


@pytest.fixture(scope="module")
def two_apps(tmp_path_factory, app_launcher):
    """App A: 0.5 s of silence around, no fade, numbers spoken. App B: no silence, 0.5 s fades, numbers as
    typed. Yields a `speak(app, text, **body) -> int16 samples` and the two apps."""
    settings = {"A": {"pad": 0.5, "fade": 0.0, "normalize_text": True},
                "B": {"pad": 0.0, "fade": 0.5, "normalize_text": False}}
    with app_launcher(_home(tmp_path_factory, settings["A"])) as a, \
            app_launcher(_home(tmp_path_factory, settings["B"])) as b:
        clients = {"A": _client(a.url), "B": _client(b.url)}

        def speak(app: str, text: str, **body) -> np.ndarray:
            extra = {**REQUEST["extra_body"], **body}
            audio = clients[app].audio.speech.create(**{**REQUEST, "extra_body": extra}, input=text).content
            return np.frombuffer(audio, np.int16).astype(np.float64)

        yield speak


def _home(tmp_path_factory, values: dict):
    home = tmp_path_factory.mktemp("voicedesk_home")
    (home / "config").mkdir()
    (home / "config" / "settings.json").write_text(json.dumps(values))
    return home


def _client(url: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{url}/v1", api_key="unused-on-loopback", max_retries=0)


def test_silence_around_and_fades_follow_the_apps_settings(two_apps):
    a, b = two_apps("A", EDGES), two_apps("B", EDGES)
    pad, fade = RATE // 2, RATE // 2
    assert len(a) == len(b) + 2 * pad  # A has 0.5 s of silence on each side, B none
    assert not a[:pad].any() and not a[-pad:].any() and a[pad] != 0  # and no fade: sound from the first sample
    made = a[pad:-pad]  # what the model made, as A plays it
    assert len(made) > 2 * fade + RATE, len(made)
    np.testing.assert_array_equal(b[fade:-fade], made[fade:-fade])  # the same sound between the fades
    ramp = np.linspace(0, 1, fade)
    np.testing.assert_allclose(b[:fade], made[:fade] * ramp, atol=2)  # B fades in and out over 0.5 s
    np.testing.assert_allclose(b[-fade:], made[-fade:] * ramp[::-1], atol=2)
    assert np.abs(made[:fade] - b[:fade]).max() > 1000  # (a fade that was not there would not pass)


@pytest.mark.skipif(not normalize_available(), reason="needs the text normalisation extra (voicedesk[tn])")
def test_numbers_are_spoken_as_the_app_says_unless_the_request_says(two_apps):
    typed, spoken = "I have 3 apples.", "I have three apples."
    same = lambda x, y: len(x) == len(y) and np.array_equal(x, y)  # noqa: E731
    assert same(two_apps("A", typed), two_apps("A", spoken))  # A speaks numbers
    assert not same(two_apps("B", typed), two_apps("B", spoken))  # B reads them as typed
    assert same(two_apps("B", typed, normalize=True), two_apps("B", spoken))  # the request wins
    assert not same(two_apps("A", typed, normalize=False), two_apps("A", spoken))
