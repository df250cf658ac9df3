"""tools/process_gpu_memory: nvidia-smi's compute-apps lines read per process (no GPU needed: the query is given)."""
from tools.process_gpu_memory import parse_compute_apps, process_gpu_gib

# what `nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader,nounits` prints: one line per process
# and GPU; some containers cannot see the numbers
LINES = "4242, 3072\n17, 512\n4242, 1024\n99, [N/A]\n"


def test_each_process_sums_its_gpus_and_unreadable_lines_are_left_out():
    assert parse_compute_apps(LINES) == {4242: 4096.0, 17: 512.0}
    assert parse_compute_apps("") == {}


def test_a_process_reads_in_gib_and_is_none_where_it_is_not_listed_or_there_is_no_nvidia_smi():
    assert process_gpu_gib(4242, query=lambda: LINES) == 4.0
    assert process_gpu_gib(17, query=lambda: LINES) == 0.5
    assert process_gpu_gib(99, query=lambda: LINES) is None  # listed, but [N/A]
    assert process_gpu_gib(5, query=lambda: LINES) is None
    assert process_gpu_gib(4242, query=lambda: None) is None
