"""`python tests/app/held_launch.py python launcher.py ARGS...`: the app as `launcher.py ARGS` runs it, but every
generation of more than HELD_AFTER parts is held before its next part until it is stopped (HOLD_S at most, then
it goes on). A test of Stop then has its generation still running whatever the machine's speed: one that ends on
its own shows Stop ignored. Used as launch_app's prefix (tests/app/conftest.py), which puts the interpreter and
launcher.py behind it."""
import functools
import runpy
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HELD_AFTER = 2  # parts given before the hold: a Stop that keeps them has two to keep
HOLD_S = 180.0  # the hold's end, only for a Stop that never comes (Stop ignored): the test then sees it end


def held(stream):
    @functools.wraps(stream)
    def stream_held(self, *args, cancel=None, **kwargs):
        for index, chunk in enumerate(stream(self, *args, cancel=cancel, **kwargs)):
            if index == HELD_AFTER and cancel is not None:
                cancel.wait(HOLD_S)  # then the engine stops at its next step, as it does for a Stop
            yield chunk
    return stream_held


if __name__ == "__main__":
    sys.path[0] = str(ROOT)
    from engine.engine import Engine

    Engine.stream = held(Engine.stream)
    sys.argv = sys.argv[2:]  # after the interpreter's path: launcher.py and its arguments
    runpy.run_path(sys.argv[0], run_name="__main__")
