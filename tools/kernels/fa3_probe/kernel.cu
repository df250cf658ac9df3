// One FlashAttention-3 forward kernel (hopper/flash_fwd_launch_template.h's run_flash_fwd) instantiated for our
// layout: varlen (cu_seqlens), head_dim 128, non-causal, no split / paging / softcap / appended KV. -D options
// from build.py choose the element type and PackGQA; the object exports one C++ function that entry.cu calls:
//   void vd_fa3_run_<name>(Flash_fwd_params&, cudaStream_t)
// FA3's source is not in this repository: build.py passes its hopper/ folder as an include path.
#include "flash_fwd_launch_template.h"

#if !defined(VD_NAME) || !defined(VD_E4M3) || !defined(VD_PACKGQA)
#error "build.py passes VD_NAME, VD_E4M3, VD_PACKGQA"
#endif

#define VD_CAT2(a, b) a##b
#define VD_CAT(a, b) VD_CAT2(a, b)

using VdElement = std::conditional_t<VD_E4M3, cutlass::float_e4m3_t, cutlass::half_t>;
using VdOut = std::conditional_t<VD_E4M3, cutlass::bfloat16_t, cutlass::half_t>;  // FA3 writes fp8 results as bf16

void VD_CAT(vd_fa3_run_, VD_NAME)(Flash_fwd_params& params, cudaStream_t stream) {
  // Arch, hdim, hdim_v, cluster 1 (varlen never clusters), Element, ElementOut, causal, local, softcap, varlen,
  // paged non-TMA, append KV, Qv, PackGQA, split, V column-major
  run_flash_fwd<90, 128, 128, 1, VdElement, VdOut, false, false, false, true, false, false, false, bool(VD_PACKGQA),
                false, false>(params, stream);
}
