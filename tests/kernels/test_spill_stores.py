"""tools.kernels.aot.spill_stores: register spills as ptxas reports them, not the stack frame a kernel's own local
arrays take (libdevice's sinf keeps one for its slow argument reduction: Triton 3.6's snake kernels have a 32 B stack
frame and no spill, which the arch check once called a spill). No GPU needed: Triton's bundled ptxas."""
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("triton")
pytest.importorskip("triton.backends.nvidia.compiler", reason="Triton without its NVIDIA backend")

from tools.kernels.aot import _cuobjdump, parse_spill_stores, spill_stores  # noqa: E402

# A kernel whose local array is indexed by a loaded value, so ptxas must keep it in local memory: a stack frame,
# no register spill.
LOCAL_ARRAY_PTX = """
.version 8.0
.target sm_89
.address_size 64
.visible .entry k(.param .u64 p)
{
  .local .align 4 .b8 depot[64];
  .reg .b64 %rd<8>; .reg .b32 %r<8>;
  ld.param.u64 %rd1, [p];
  cvta.to.global.u64 %rd1, %rd1;
  mov.u64 %rd2, depot;
  ld.global.u32 %r1, [%rd1];
  ld.global.u32 %r2, [%rd1+4];
  and.b32 %r3, %r2, 15;
  mul.wide.u32 %rd3, %r3, 4;
  add.u64 %rd4, %rd2, %rd3;
  st.local.u32 [%rd4], %r1;
  and.b32 %r4, %r1, 15;
  mul.wide.u32 %rd5, %r4, 4;
  add.u64 %rd6, %rd2, %rd5;
  ld.local.u32 %r5, [%rd6];
  st.global.u32 [%rd1+8], %r5;
  ret;
}
"""


def test_a_local_array_takes_stack_but_is_no_spill(tmp_path):
    assert spill_stores(LOCAL_ARRAY_PTX) == 0
    from triton.backends.nvidia.compiler import get_ptxas

    ptx, cubin = tmp_path / "k.ptx", tmp_path / "k.cubin"
    ptx.write_text(LOCAL_ARRAY_PTX)
    subprocess.run([get_ptxas(89).path, "--gpu-name", "sm_89", str(ptx), "-o", str(cubin)], check=True)
    usage = _cuobjdump(cubin.read_bytes(), "--dump-resource-usage").stdout
    assert int(re.search(r"STACK:(\d+)", usage).group(1)) > 0  # what the old measure counted as spilled


def test_a_register_cap_makes_a_real_kernel_spill():
    """The attention kernel as built for sm_89, then with its registers capped at 48: ptxas must spill."""
    script = (
        "import re\n"
        "from tools.kernels import aot_archs\n"
        "from tools.kernels.aot import spill_stores\n"
        "build = next(b for b in aot_archs.arch_builds(89) if b.name.startswith('ragged attention'))\n"
        "ptx = aot_archs.compile_build(build, 89).asm['ptx']\n"
        "capped = re.sub(r'(\\.visible \\.entry [^{]*)\\{', r'\\1.maxnreg 48\\n{', ptx, count=1)\n"
        "print(spill_stores(ptx), '.maxnreg 48' in capped, spill_stores(capped))\n")
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}  # the compiler needs real Triton functions
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env,
                         cwd=Path(__file__).parents[2], timeout=300, check=False)
    plain, capped_in_ptx, capped = run.stdout.split()
    assert (int(plain), capped_in_ptx) == (0, "True"), run.stderr[-2000:]
    assert int(capped) > 0


def test_the_report_gives_the_largest_function_and_fails_without_figures():
    report = ("ptxas info    : Function properties for helper\n"
              "    16 bytes stack frame, 8 bytes spill stores, 8 bytes spill loads\n"
              "ptxas info    : Function properties for kernel\n"
              "    32 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n")
    assert parse_spill_stores(report) == 8
    with pytest.raises(ValueError, match="no spill figures"):
        parse_spill_stores("ptxas fatal   : Unsupported .version 9.4")
