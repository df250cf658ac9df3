"""The synthesis chain cannot swap `instruct` and `language` (both optional strings): the request object
takes keywords only, and every function on the way from the UI to the runner that still names them
takes them by keyword only."""
import inspect

import pytest

from app.studio import render as studio_render
from engine.checks.checker import Checker
from engine.checks.takes import checked_take
from engine.engine import Engine
from engine.lm.plan import plan_request
from engine.request import SpeechRequest

CHAIN = [Engine.synthesize, Engine.takes, Engine.stream, Engine.first_step_logits, Engine._request,
         Checker.check, studio_render._made_voice]
STRINGS_THAT_LOOK_ALIKE = ("instruct", "language")


def test_a_request_cannot_be_built_by_position():
    with pytest.raises(TypeError):
        SpeechRequest("Hello.", None, "female, low pitch", "English")
    request = SpeechRequest(text="Hello.", instruct="female, low pitch", language="English")
    assert (request.instruct, request.language) == ("female, low pitch", "English")
    assert request.with_seed(7).config.seed == 7 and request.config.seed is None  # frozen: a copy changes


@pytest.mark.parametrize("fn", CHAIN, ids=lambda fn: fn.__qualname__)
def test_instruct_and_language_are_keyword_only_along_the_chain(fn):
    params = inspect.signature(fn).parameters
    named = [name for name in STRINGS_THAT_LOOK_ALIKE if name in params]
    assert named, f"{fn.__qualname__} no longer takes them: drop it from CHAIN"
    assert all(params[name].kind is inspect.Parameter.KEYWORD_ONLY for name in named)


@pytest.mark.parametrize("fn", [Engine.render, plan_request, checked_take], ids=lambda fn: fn.__qualname__)
def test_the_inner_chain_passes_one_request(fn):
    params = inspect.signature(fn).parameters
    assert "request" in params and not any(name in params for name in STRINGS_THAT_LOOK_ALIKE)


def test_a_swapped_call_is_refused():
    engine = object.__new__(Engine)  # the signature is what refuses it: nothing is loaded
    with pytest.raises(TypeError):
        engine.synthesize("Hello.", None, "English", "female, low pitch")
