"""WeTextProcessing's grammars in a child process of their own: pynini keeps Python's GIL for a whole call
(41 s for 50,000 characters), which froze every thread of the app meanwhile (the GPU worker, the web server's
event loop, Stop). In a child, the app's threads keep running and Stop abandons a run at once.

One child per app process, started on first use or by `start_child` ("spawn": it imports only this module and
`engine.text.normalize`, no torch), reused for later calls, one call at a time. On Stop during a run the child is
killed and a new one started, its grammar loading: the next call never waits behind the stopped run. A child that
dies gives a TextInputError for that call and is replaced at the next. The child is a daemon: it ends with the app.
"""
from __future__ import annotations

import multiprocessing
import signal
import threading
from dataclasses import dataclass
from multiprocessing.connection import Connection

from engine.errors import Cancelled, TextInputError, VoiceDeskError

POLL_S = 0.05  # how often a caller looks at its cancel event while waiting


@dataclass
class _Child:
    process: multiprocessing.process.BaseProcess
    conn: Connection


_lock = threading.Lock()  # one call at a time in the child
_child: _Child | None = None


def normalized_in_child(text: str, *, language: str, pinyin: bool, cancel: threading.Event | None = None) -> str:
    """`normalize.outside_markup(text, normalize.wetext_grammar(language), pinyin)`, run in the child.

    Raises
    ------
    Cancelled
        When `cancel` is set before the result came (the child is then killed).
    TextInputError
        When the child died during the call, or the grammar cannot be loaded there.
    """
    while not _lock.acquire(timeout=POLL_S):  # another thread's call: Stop is heard while waiting for it too
        _raise_if_set(cancel)
    try:
        _raise_if_set(cancel)
        child = _started(language)
        try:
            child.conn.send((text, language, pinyin))
            while not child.conn.poll(POLL_S):  # a dead child's end of the pipe reads as EOF: poll returns
                if cancel is not None and cancel.is_set():
                    stop()
                    _started(language)  # a fresh child loads its grammar meanwhile: the next request won't wait
                    raise Cancelled("Stopped.")
            ok, value = child.conn.recv()
        except (EOFError, OSError):
            stop()
            raise TextInputError("Speaking numbers and dates failed: the text normalisation process ended "
                                 f"unexpectedly (exit code {child.process.exitcode}). Try again, or turn "
                                 "'Speak numbers and dates' off.") from None
    finally:
        _lock.release()
    if not ok:
        raise value
    return value


def start_child(language: str) -> None:
    """Start the child, unless there is one: it loads `language`'s grammar (seconds) while the app goes on."""
    with _lock:
        _started(language)


def stop() -> None:
    """Kill the child, if there is one (the next call starts another)."""
    global _child
    child, _child = _child, None
    if child is not None:
        child.process.kill()
        child.process.join()
        child.conn.close()


def _raise_if_set(cancel: threading.Event | None) -> None:
    if cancel is not None and cancel.is_set():
        raise Cancelled("Stopped.")


def _started(language: str) -> _Child:
    """The child, started if there is none (or it died) and then loading `language`'s grammar at once."""
    global _child
    if _child is None or not _child.process.is_alive():
        stop()
        context = multiprocessing.get_context("spawn")
        ours, theirs = context.Pipe()
        process = context.Process(target=_serve, args=(theirs, language), name="voicedesk-normalize", daemon=True)
        process.start()
        theirs.close()  # only the child holds its end: its death reads as EOF here
        _child = _Child(process, ours)
    return _child


def _serve(conn: Connection, language: str) -> None:
    """The child: load `language`'s grammar, then answer (text, language, pinyin) requests with (True, spoken) or
    (False, error) until EOF."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl+C is the app's to handle: it ends the child as a daemon
    from engine.text.normalize import outside_markup, wetext_grammar
    try:
        wetext_grammar(language)
    except VoiceDeskError:
        pass  # said to the request that needs it
    while True:
        try:
            text, language, pinyin = conn.recv()
        except EOFError:
            return
        try:
            conn.send((True, outside_markup(text, wetext_grammar(language), pinyin)))
        except VoiceDeskError as err:
            conn.send((False, err))
        except Exception as err:  # any other failure, as a message the app can show (it may not pickle)
            conn.send((False, TextInputError(f"Speaking numbers and dates failed ({type(err).__name__}: {err}).")))
