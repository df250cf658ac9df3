// y[M, N] = silu(g) * u with [g | u] = x[M, K] @ w[2N, K]^T, the SwiGLU in the GEMM's epilogue: the [M, 2N] product
// never reaches memory. w is the gate_up weight with its rows interleaved in blocks of 8 (8 gate rows, then the 8 up
// rows of the same output columns: `interleave_gate_up` in library.py), so in the wgmma accumulator layout, where a
// thread's values step through the tile's columns 8 at a time, every thread holds each gate value's up partner
// 4 registers on. Numerics are kernels/swiglu.py's after an fp16 GEMM: g and u rounded to fp16, silu in fp32 as
// g / (1 + expf(-g)) (a correctly rounded division) rounded to fp16, the product in fp32 rounded to fp16.
// Same -D options and exported signature as gemm.cu (n: y's columns; splits must be 1). Written against CUTLASS 4.2.0.
#include <cuda_fp16.h>

#include "cutlass/epilogue/collective/detail.hpp"
#include "cutlass/gemm/device/gemm_universal_adapter.h"
#include "cutlass/gemm/kernel/gemm_universal.hpp"
#include "cutlass/util/packed_stride.hpp"

#include "config.h"
#include "status.h"

#if VD_STREAMK || VD_SWAP
#error "the SwiGLU epilogue needs whole K sums and y's rows as CUTLASS's M"
#endif

#define VD_FN VD_CAT(vd_gemm_, VD_NAME)
#define VD_WS VD_CAT(VD_FN, _workspace)

using namespace cute;
using namespace vd;

namespace {

#if VD_INTERLEAVE != 8
#error "the register pairing below (value i's up partner at i + 4) holds for blocks of 8 rows, one wgmma column group"
#endif
constexpr int kInterleave = VD_INTERLEAVE;  // gate and up rows alternate in blocks of this many

// An epilogue in the shape of CUTLASS's DefaultEpilogue (registers straight to global memory, no shared memory),
// wrapped below in the adapter that fits such epilogues to the warp-specialised kernels.
class SwiGLUEpilogue {
 public:
  using EpilogueSchedule = cutlass::gemm::EpilogueDefault;
  using DispatchPolicy = EpilogueSchedule;
  using ElementAccumulator = Accumulator;
  using ElementCompute = float;
  using ElementScalar = float;
  using ElementOutput = Element;
  using ElementC = void;
  using ElementD = Element;
  using StrideC = cute::Stride<int64_t, cute::Int<1>, int64_t>;
  using StrideD = StrideC;
  using GmemTiledCopyC = void;
  using GmemTiledCopyD = void;
  using ThreadEpilogueOp = void;  // GemmUniversalAdapter names it; nothing uses it
  struct SharedStorage {};
  using TensorStorage = SharedStorage;
  struct Arguments {
    Element* y = nullptr;  // [M, N / 2] row-major, N the GEMM's (gate and up) width
  };
  using Params = Arguments;

  template <class ProblemShape>
  static constexpr Params to_underlying_arguments(ProblemShape const&, Arguments const& args, void*) {
    return args;
  }
  template <class ProblemShape>
  static size_t get_workspace_size(ProblemShape const&, Arguments const&) { return 0; }
  template <class ProblemShape>
  static cutlass::Status initialize_workspace(ProblemShape const&, Arguments const&, void*, cudaStream_t,
                                              cutlass::CudaHostAdapter* = nullptr) {
    return cutlass::Status::kSuccess;
  }
  template <class ProblemShape>
  static bool can_implement(ProblemShape const& problem_shape, Arguments const& args) {
    return args.y != nullptr && get<1>(problem_shape) % (2 * kInterleave) == 0;
  }

  CUTLASS_HOST_DEVICE SwiGLUEpilogue(Params const& params_, SharedStorage const& = SharedStorage()) : params(params_) {}

  template <class ProblemShapeMNKL, class BlockShapeMNK, class BlockCoordMNKL, class FrgEngine, class FrgLayout,
            class TiledMma, class ResidueMNK>
  CUTLASS_DEVICE void operator()(ProblemShapeMNKL problem_shape_mnkl, BlockShapeMNK blk_shape_MNK,
                                 BlockCoordMNKL blk_coord_mnkl, cute::Tensor<FrgEngine, FrgLayout> const& accumulators,
                                 TiledMma tiled_mma, ResidueMNK, int thread_idx, char*) {
    static_assert(is_static<FrgLayout>::value, "Accumulator layout must be static");
    // The wgmma C fragment's first mode is ((2 columns, 2 rows 8 apart, tile N / 8 column groups)): values i and
    // i + 4 are the same row and columns 8 apart, and i % 8 < 4 is an even column group (gate).
    static_assert(size<0>(FrgLayout{}) % 8 == 0, "a thread's values must cover whole pairs of column groups");
    const int M = get<0>(problem_shape_mnkl);
    const int N = get<1>(problem_shape_mnkl);
    auto [m_coord, n_coord, k_coord, l_coord] = blk_coord_mnkl;
    Tensor coords = local_tile(make_identity_tensor(make_shape(M, N)), take<0, 2>(blk_shape_MNK),
                               make_coord(m_coord, n_coord));  // (BLK_M, BLK_N) -> (m, n)
    Tensor thread_coords = tiled_mma.get_thread_slice(thread_idx).partition_C(coords);  // like accumulators
    CUTE_STATIC_ASSERT_V(size(thread_coords) == size(accumulators));
    const int64_t ld = N / 2;
    CUTLASS_PRAGMA_UNROLL
    for (int i = 0; i < size(accumulators); i += 2) {
      if (i % 8 >= 4) continue;  // an up value: handled with its gate
      auto [m, n] = thread_coords(i);
      if (m >= M || n >= N) continue;  // past the problem's edge (N % 16 == 0: then n + 8 < N too)
      __half out[2];
      CUTLASS_PRAGMA_UNROLL
      for (int j = 0; j < 2; ++j) {  // two adjacent columns
        const float g = __half2float(__float2half_rn(accumulators(i + j)));
        const float u = __half2float(__float2half_rn(accumulators(i + j + 4)));
        // _rn intrinsics: no contraction into an FMA with expf's last step, as Triton's enable_fp_fusion=False
        const float silu = __half2float(__float2half_rn(__fdiv_rn(g, __fadd_rn(1.0f, expf(-g)))));
        out[j] = __float2half_rn(__fmul_rn(silu, u));
      }
      const int64_t column = (n / (2 * kInterleave)) * kInterleave + n % kInterleave;
      *reinterpret_cast<__half2*>(reinterpret_cast<__half*>(params.y) + m * ld + column) =
          __halves2half2(out[0], out[1]);
    }
  }

 private:
  Params params;
};

using CollectiveEpilogue = cutlass::epilogue::collective::detail::Sm90TmaWarpSpecializedAdapter<SwiGLUEpilogue>;
using Kernel = cutlass::gemm::kernel::GemmUniversal<Shape<int, int, int, int>, Mainloop<0>, CollectiveEpilogue,
                                                    Scheduler>;
using Gemm = cutlass::gemm::device::GemmUniversalAdapter<Kernel>;

int make_arguments(const void* x, const void* w, void* y, int m, int n, int k, int splits,
                   typename Gemm::Arguments* out) {
  if (m <= 0 || n <= 0 || k <= 0 || splits != 1) return VD_BAD_ARGUMENT;
  if (sm_count() <= 0) return VD_NO_DEVICE;  // the scheduler divides by it
  auto stride_a = cutlass::make_cute_packed_stride(typename Kernel::StrideA{}, cute::make_shape(m, k, 1));
  auto stride_b = cutlass::make_cute_packed_stride(typename Kernel::StrideB{}, cute::make_shape(2 * n, k, 1));
  *out = typename Gemm::Arguments{
      cutlass::gemm::GemmUniversalMode::kGemm,
      {m, 2 * n, k, 1},
      {static_cast<const Element*>(x), stride_a, static_cast<const Element*>(w), stride_b},
      {static_cast<Element*>(y)},
      hardware()};
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
