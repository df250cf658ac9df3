"""The API's `accept` span (POST /v1/audio/speech: the handler's start until the generation is queued, Server-Timing)
when N requests arrive at once, on several trees side by side: a demo server of each (the tree's own
tools/bench_server.Server: High fidelity, the tiny random checkpoint, the CPU), then rounds that alternate between them
(each round the order of the trees turns round): N clients send the paragraph of tools/bench_clients at the same
moment (built-in voice 'alloy', pcm, different seeds), read the response's headers and hang up (the job is cancelled
at its next step), and the next round starts 2 s later. Per tree and N, over every client of every round (ms, median
p90 max): `accept`; `outside`, what a client waited for the response's headers beyond the server's spans (accept,
queue, engine, handoff): its connection, the wait for the handler to start, the headers' way back, which is where the
time goes when the event loop is busy with the other requests, and which the accept span does not show; and
`accept+outside` of each request, the wait that is not the GPU's line nor its work. Its client threads are
api_bench.py's, beside it. Run from a tree's root (this script's imports), naming each tree to serve, e.g.
    git archive 9cbc4ec | tar -x -C /tmp/main
    PYTHONPATH=$PWD python docs/bench/cpu-api-accept-20261206.py --tree main=/tmp/main --tree inline=/tmp/inline \
        [--clients 1,8] [--rounds 20]"""
import argparse
import contextlib
import importlib.util
import os
import platform
import statistics
import tempfile
import threading
import time
from pathlib import Path

import httpx
from api_bench import at_once

from tools.bench_clients import PARAGRAPH, server_timing

SPANS = ("accept", "queue", "engine", "handoff")  # the server's spans up to the response's start, in order


def headers_of(url: str, seed: int, start: threading.Barrier) -> tuple[float, float]:
    """One client: (accept ms, outside ms) of a request sent once every client of the round is ready."""
    body = {"model": "tts-1", "voice": "alloy", "input": PARAGRAPH, "response_format": "pcm", "seed": seed}
    with httpx.Client(timeout=600) as client:  # made before the round: an SSL context costs ~18 ms of CPU
        request = client.build_request("POST", f"{url}/v1/audio/speech", json=body)
        start.wait()
        sent = time.perf_counter()
        response = client.send(request, stream=True)
        waited_ms = 1e3 * (time.perf_counter() - sent)
        response.close()  # hangs up: the server cancels the generation
    response.raise_for_status()
    spans = server_timing(response.headers.get("server-timing"))
    return spans["accept"], waited_ms - sum(spans[name] for name in SPANS)


def one_round(url: str, clients: int, seed: int) -> list[tuple[float, float]]:
    return at_once(clients, lambda i, start: headers_of(url, seed + i, start))


def summary(values: list[float]) -> str:
    ordered = sorted(values)
    p90 = ordered[min(len(ordered) - 1, round(0.9 * (len(ordered) - 1)))]
    return f"{statistics.median(ordered):6.2f} {p90:6.2f} {ordered[-1]:6.2f}"


def tree_server(name: str, root: Path):
    """The tree's own tools/bench_server.Server class: it starts that tree's launcher.py."""
    spec = importlib.util.spec_from_file_location(f"bench_server_{name}", root / "tools" / "bench_server.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.Server


def load() -> str:
    return "load average " + " ".join(f"{value:.2f}" for value in os.getloadavg())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tree", action="append", required=True, help="NAME=PATH: a tree to serve (repeat it)")
    parser.add_argument("--clients", default="1,8")
    parser.add_argument("--rounds", type=int, default=20)
    args = parser.parse_args()
    trees = {name: Path(path).resolve() for name, _, path in (tree.partition("=") for tree in args.tree)}
    counts = [int(n) for n in args.clients.split(",")]
    print(f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}; "
          f"{load()} at the start; ms: median p90 max", flush=True)
    with contextlib.ExitStack() as stack:
        servers = {name: stack.enter_context(tree_server(name, root)(Path(tempfile.mkdtemp(prefix=f"accept-{name}-")),
                                                                     ["--mode", "hifi", "--demo"]))
                   for name, root in trees.items()}
        for server in servers.values():
            server.until(lambda url=server.url: one_round(url, 1, 0))  # listening and loaded
            one_round(server.url, max(counts), 0)  # warm: the most clients' batches
        time.sleep(2)
        for clients in counts:
            measured: dict[str, list[tuple[float, float]]] = {name: [] for name in servers}
            for k in range(args.rounds):
                for name in (list(servers) if k % 2 == 0 else list(servers)[::-1]):
                    measured[name] += one_round(servers[name].url, clients, 100 * k)
                    time.sleep(2)  # the cancelled generations end
            for name, results in measured.items():
                accept, outside = [a for a, _ in results], [o for _, o in results]
                print(f"{clients} at once, {name:8s} ({len(results):3d} requests): accept {summary(accept)} | outside "
                      f"{summary(outside)} | accept+outside {summary([a + o for a, o in results])}", flush=True)
    print(f"{load()} at the end")


if __name__ == "__main__":
    main()
