"""Which CUDA calls of ANOTHER thread break a CUDA-graph capture (or fail themselves) while one thread captures,
in torch.cuda.graph's default capture_error_mode="global" and in "thread_local". Run on the H200 (2026-12-04,
BENCHMARKS.md): in global mode an event query or sync, tensor.cpu(), a small model's forward, a new device or
pinned allocation each fail and invalidate the capture; in thread_local none does and the graph replays right.
So StaticRunner captures in thread_local mode (tests/engine/test_runner_capture.py).
One op per fresh process: `python3 -m tools.capture_overlap OP MODE` -> one JSON line; every op in both modes:
`bash tests/gpu/run_gpu.sh captures`."""
import json
import sys
import threading

import torch


def main(op_name: str, mode: str) -> None:
    dev = torch.device("cuda")
    ready = torch.ones(4096, device=dev)  # made before the capture: a device tensor another thread reads back
    lin = torch.nn.Linear(256, 256, device=dev)
    event = torch.cuda.Event(enable_timing=True)
    event.record()
    torch.cuda.synchronize()

    def op():
        if op_name == "event_synchronize":  # QueuedDecode.waves, DeviceSpan.seconds
            e = torch.cuda.Event()
            e.record()
            e.synchronize()
        elif op_name == "event_query":
            event.query()
        elif op_name == "tensor_cpu":  # Voice.of_generated(result.tokens[0]): tokens made before, read back
            ready.cpu()
        elif op_name == "small_model":  # a checks model: H2D of pageable input, forward, .cpu() (engine/checks)
            x = torch.randn(8, 256).to(dev)
            lin(x).float().cpu()
        elif op_name == "kernel_only":  # launches on the default stream, no sync, no new memory
            ready.mul_(1.0)
        elif op_name == "new_device_memory":  # a size the caching allocator has no block for: cudaMalloc
            torch.empty(64 << 20, device=dev)
        elif op_name == "pinned_alloc":  # the host allocator queries its blocks' events
            torch.empty(1 << 20, pin_memory=True)
        elif op_name == "mem_get_info":  # MemoryBudget.for_device
            torch.cuda.mem_get_info(dev)
        elif op_name == "none":
            pass
        else:
            raise SystemExit(f"unknown op {op_name}")

    started, finished = threading.Event(), threading.Event()
    result = {"op": op_name, "mode": mode, "op_error": None, "capture_error": None, "replay_ok": None}

    def other():
        assert started.wait(60)
        try:
            op()
        except Exception as err:  # noqa: BLE001 - the point is which error
            result["op_error"] = f"{type(err).__name__}: {str(err).splitlines()[0][:160]}"
        finally:
            finished.set()

    x = torch.zeros(1 << 16, device=dev)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        y = x * 2 + 1  # warm-up
    torch.cuda.current_stream().wait_stream(side)
    thread = threading.Thread(target=other)
    thread.start()
    graph = torch.cuda.CUDAGraph()
    try:
        with torch.cuda.graph(graph, capture_error_mode=mode):
            y = x * 2
            started.set()
            assert finished.wait(60)  # the other thread's call happens mid-capture
            y = y + 1
    except Exception as err:  # noqa: BLE001
        result["capture_error"] = f"{type(err).__name__}: {str(err).splitlines()[0][:160]}"
    thread.join(60)
    if result["capture_error"] is None:
        try:
            x.fill_(3.0)
            graph.replay()
            torch.cuda.synchronize()
            result["replay_ok"] = bool((y == 7).all().item())
        except Exception as err:  # noqa: BLE001
            result["replay_ok"] = f"{type(err).__name__}: {str(err).splitlines()[0][:160]}"
    print(json.dumps(result))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
