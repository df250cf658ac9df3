"""engine/gather.py: how long the next batch waits for a member's next call (Gathering._wait_s), read off states set up
by hand, and member blocks nested in one thread. No thread runs, so nothing depends on timing."""
import time

import pytest

from engine.gather import POLL_S, Call, Gathering, Member

MEMBER = -1  # a thread id no test thread has: the member awaited


def _gathering(first: bool = False) -> Gathering:
    """A gathering with one call waiting (from this thread; a stream's first call if `first`) and a member of another
    thread that has made a call and has not asked again."""
    gathering = Gathering(lambda works, batch: works)
    gathering._members[MEMBER] = Member(1, 1, calls=1 if not first else 0)
    gathering._waiting.append(Call("w", "a", None, 2, first=first))
    return gathering


@pytest.fixture
def no_grace(monkeypatch):
    monkeypatch.setattr("engine.gather.GRACE_S", 0.0)


def test_a_member_completing_its_value_is_waited_for_beyond_the_grace(no_grace):
    gathering = _gathering()
    gathering._completing.add(MEMBER)
    assert gathering._wait_s() == POLL_S
    gathering._completing.clear()
    assert gathering._wait_s() <= 0


def test_a_member_whose_call_is_in_a_batch_is_waited_for_beyond_the_grace(no_grace):
    gathering = _gathering()
    gathering._in_batches.append(Call("x", "a", None, 1, first=False, thread=MEMBER))
    assert gathering._wait_s() == POLL_S
    gathering._in_batches.clear()
    assert gathering._wait_s() <= 0


def test_the_grace_starts_when_a_value_was_completed_last(monkeypatch):
    monkeypatch.setattr("engine.gather.GRACE_S", 3600.0)
    gathering = _gathering()
    gathering._free_at = time.monotonic() - 2 * 3600
    assert gathering._wait_s() <= 0
    with gathering.completing():
        pass
    assert gathering._wait_s() > 3000


def test_a_starting_batchs_grace_starts_at_the_later_of_its_oldest_call_and_the_last_batchs_end(monkeypatch):
    """A member yet to make its first call holds a batch of starting streams back for GRACE_S from whichever came
    last: the batch before it ended, or its oldest call was asked."""
    monkeypatch.setattr("engine.gather.GRACE_S", 3600.0)
    gathering = _gathering(first=True)
    gathering._waiting[0].asked_at = time.monotonic() - 2 * 3600
    gathering._free_at = time.monotonic()
    assert gathering._wait_s() > 3000
    gathering._free_at, gathering._waiting[0].asked_at = gathering._waiting[0].asked_at, time.monotonic()
    assert gathering._wait_s() > 3000


def test_a_thread_stays_a_member_until_its_outer_block_ends():
    gathering = Gathering(lambda works, batch: works)
    with gathering.member():
        with gathering.member():
            pass
        assert len(gathering._members) == 1  # its next call is still awaited, and not a first one
    assert not gathering._members
