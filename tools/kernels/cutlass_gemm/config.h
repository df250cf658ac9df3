// What gemm.cu and gemm_swiglu.cu share: the -D options build.py passes (configs.py is the one list of them), the
// tile, cluster, schedules and scheduler they name, the mainloop, and the SM count the schedulers need.
// Written against CUTLASS 4.2.0 (nvidia-cutlass 4.2.0.0's headers).
#pragma once
#include <cuda_runtime.h>

#include "cute/tensor.hpp"
#include "cutlass/cutlass.h"
#include "cutlass/gemm/collective/collective_builder.hpp"
#include "cutlass/gemm/kernel/tile_scheduler.hpp"

#if !defined(VD_NAME) || !defined(VD_TM) || !defined(VD_TN) || !defined(VD_TK) || !defined(VD_CM) || \
    !defined(VD_CN) || !defined(VD_PINGPONG) || !defined(VD_STREAMK) || !defined(VD_SWAP)
#error "build.py passes VD_NAME, VD_TM, VD_TN, VD_TK, VD_CM, VD_CN, VD_PINGPONG, VD_STREAMK, VD_SWAP"
#endif
#if VD_PINGPONG && VD_STREAMK
#error "CUTLASS's stream-K scheduler runs with the cooperative schedule only"
#endif

#define VD_CAT2(a, b) a##b
#define VD_CAT(a, b) VD_CAT2(a, b)

namespace vd {

using Element = cutlass::half_t;
using Accumulator = float;
constexpr int kAlignment = 16 / sizeof(Element);  // TMA wants 16-byte rows

using LayoutA = cutlass::layout::RowMajor;     // K contiguous
using LayoutB = cutlass::layout::ColumnMajor;  // K contiguous
using TileShape = cute::Shape<cute::Int<VD_TM>, cute::Int<VD_TN>, cute::Int<VD_TK>>;
using ClusterShape = cute::Shape<cute::Int<VD_CM>, cute::Int<VD_CN>, cute::_1>;
using MainloopSchedule = cute::conditional_t<VD_PINGPONG, cutlass::gemm::KernelTmaWarpSpecializedPingpong,
                                             cutlass::gemm::KernelTmaWarpSpecializedCooperative>;
using Scheduler = cute::conditional_t<VD_STREAMK, cutlass::gemm::StreamKScheduler, cutlass::gemm::PersistentScheduler>;

// TMA loads, as many stages as the shared memory left by the epilogue's holds.
template <int EpilogueSmemBytes>
using Mainloop = typename cutlass::gemm::collective::CollectiveBuilder<
    cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, Element, LayoutA, kAlignment, Element, LayoutB, kAlignment,
    Accumulator, TileShape, ClusterShape, cutlass::gemm::collective::StageCountAutoCarveout<EpilogueSmemBytes>,
    MainloopSchedule>::CollectiveOp;

inline int sm_count() {  // asked once: the harness calls this outside CUDA-graph captures first
  static int count = 0;
  if (count == 0) {
    int device = 0;
    if (cudaGetDevice(&device) == cudaSuccess) {
      cudaDeviceGetAttribute(&count, cudaDevAttrMultiProcessorCount, device);
    }
  }
  return count;
}

inline cutlass::KernelHardwareInfo hardware() {
  cutlass::KernelHardwareInfo info;
  cudaGetDevice(&info.device_id);
  info.sm_count = sm_count();
  return info;
}

}  // namespace vd
