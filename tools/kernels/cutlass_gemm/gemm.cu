// y[M, N] = x[M, K] @ w[N, K]^T in fp16 with fp32 accumulation, through CUTLASS 3's sm90 collective builder
// (TMA, warp-specialised mainloop, persistent or stream-K tile scheduler). Written against CUTLASS 4.2.0
// (nvidia-cutlass 4.2.0.0's headers). One configuration per compilation, chosen by the -D options config.h
// reads; each object exports
//   int  vd_gemm_<name>(x, w, y, m, n, k, splits, workspace, workspace_bytes, stream)  -> 0 or an error code
//   long vd_gemm_<name>_workspace(m, n, k, splits)                                     -> bytes, or < 0
// VD_SWAP computes y^T = w @ x^T (the weight's N rows as CUTLASS's M), so a small M is the N side of a tile.
#include "cutlass/epilogue/collective/collective_builder.hpp"
#include "cutlass/gemm/device/gemm_universal_adapter.h"
#include "cutlass/gemm/kernel/gemm_universal.hpp"
#include "cutlass/util/packed_stride.hpp"

#include "config.h"
#include "status.h"

#define VD_FN VD_CAT(vd_gemm_, VD_NAME)
#define VD_WS VD_CAT(VD_FN, _workspace)

using namespace cute;
using namespace vd;

namespace {

// Swapped, CUTLASS's A is the weight (N x K, K contiguous) and its D is y^T (N x M) stored column-major = y.
using LayoutD = cute::conditional_t<VD_SWAP, cutlass::layout::ColumnMajor, cutlass::layout::RowMajor>;
using EpilogueSchedule = cute::conditional_t<VD_PINGPONG, cutlass::epilogue::TmaWarpSpecialized,
                                             cutlass::epilogue::TmaWarpSpecializedCooperative>;

// D = 1 * acc rounded to nearest fp16; no C operand (void): nothing read besides x and w.
using Fusion = cutlass::epilogue::fusion::LinearCombination<Element, Accumulator, void, Accumulator,
                                                            cutlass::FloatRoundStyle::round_to_nearest>;

using CollectiveEpilogue = typename cutlass::epilogue::collective::CollectiveBuilder<
    cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, TileShape, ClusterShape,
    cutlass::epilogue::collective::EpilogueTileAuto, Accumulator, Accumulator,
    void, LayoutD, kAlignment, Element, LayoutD, kAlignment, EpilogueSchedule, Fusion>::CollectiveOp;

using Kernel = cutlass::gemm::kernel::GemmUniversal<
    Shape<int, int, int, int>, Mainloop<static_cast<int>(sizeof(typename CollectiveEpilogue::SharedStorage))>,
    CollectiveEpilogue, Scheduler>;
using Gemm = cutlass::gemm::device::GemmUniversalAdapter<Kernel>;

// x, w, y as the caller sees them -> CUTLASS's arguments (swapped or not); splits: 1, or a split-K count (stream-K
// configurations only).
int make_arguments(const void* x, const void* w, void* y, int m, int n, int k, int splits,
                   typename Gemm::Arguments* out) {
  if (m <= 0 || n <= 0 || k <= 0 || splits < 1) return VD_BAD_ARGUMENT;
  if (!VD_STREAMK && splits != 1) return VD_BAD_ARGUMENT;
  if (sm_count() <= 0) return VD_NO_DEVICE;  // the schedulers divide by it
  const int gm = VD_SWAP ? n : m, gn = VD_SWAP ? m : n;
  const void* a = VD_SWAP ? w : x;
  const void* b = VD_SWAP ? x : w;
  auto stride_a = cutlass::make_cute_packed_stride(typename Kernel::StrideA{}, cute::make_shape(gm, k, 1));
  auto stride_b = cutlass::make_cute_packed_stride(typename Kernel::StrideB{}, cute::make_shape(gn, k, 1));
  auto stride_d = cutlass::make_cute_packed_stride(typename Kernel::StrideD{}, cute::make_shape(gm, gn, 1));
  typename Gemm::Arguments arguments{
      cutlass::gemm::GemmUniversalMode::kGemm,
      {gm, gn, k, 1},
      {static_cast<const Element*>(a), stride_a, static_cast<const Element*>(b), stride_b},
      {{}, nullptr, stride_d, static_cast<Element*>(y), stride_d},
      hardware()};
  arguments.epilogue.thread.alpha = 1.0f;
  arguments.epilogue.thread.beta = 0.0f;
#if VD_STREAMK
  using Mode = typename Kernel::TileScheduler::DecompositionMode;
  arguments.scheduler.splits = splits;
  arguments.scheduler.decomposition_mode = splits > 1 ? Mode::SplitK : Mode::StreamK;
#endif
  *out = arguments;
  return VD_OK;
}

}  // namespace

extern "C" long VD_WS(int m, int n, int k, int splits) {
  typename Gemm::Arguments arguments;
  int status = make_arguments(nullptr, nullptr, nullptr, m, n, k, splits, &arguments);
  if (status != VD_OK) return -status;
  return static_cast<long>(Gemm::get_workspace_size(arguments));
}

extern "C" int VD_FN(const void* x, const void* w, void* y, int m, int n, int k, int splits, void* workspace,
                     size_t workspace_bytes, cudaStream_t stream) {
  typename Gemm::Arguments arguments;
  int status = make_arguments(x, w, y, m, n, k, splits, &arguments);
  if (status != VD_OK) return status;
  if (Gemm::can_implement(arguments) != cutlass::Status::kSuccess) return VD_CANNOT_IMPLEMENT;
  if (Gemm::get_workspace_size(arguments) > workspace_bytes) return VD_WORKSPACE_TOO_SMALL;
  Gemm gemm;
  if (gemm.initialize(arguments, workspace, stream) != cutlass::Status::kSuccess) return VD_INITIALIZE_FAILED;
  if (gemm.run(stream) != cutlass::Status::kSuccess) return VD_LAUNCH_FAILED;
  return cudaGetLastError() == cudaSuccess ? VD_OK : VD_LAUNCH_FAILED;
}
