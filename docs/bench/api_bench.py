"""What the API benches beside this file share (cpu-api-accept, cpu-issue23-prepare): their clients' requests sent at
the same moment, each from a thread of its own. They import it as a sibling, run as their records say, from the root
of the tree to time: `PYTHONPATH=$PWD python docs/bench/<bench>.py` (Python puts the script's folder first on
sys.path, so this file is found beside the script; PYTHONPATH gives that tree's tools)."""
import threading
from collections.abc import Callable
from typing import TypeVar

Result = TypeVar("Result")


def at_once(clients: int, client: Callable[[int, threading.Barrier], Result]) -> list[Result]:
    """`client(i, start)` for i in 0..clients-1, each in a thread of its own, where `start` is a barrier of them all
    for a client to wait on right before it sends its request: their results in order of i, once every thread has
    ended. The first error a client meets is raised then; it breaks the barrier, so no other client waits on it."""
    start = threading.Barrier(clients)
    results: list = [None] * clients
    errors: list[BaseException] = []  # in the order they happened: the first is the cause, the barrier's are after

    def run(i: int) -> None:
        try:
            results[i] = client(i, start)
        except BaseException as err:  # raised below, in the caller's thread
            errors.append(err)
            start.abort()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]
    return results
