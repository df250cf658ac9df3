// The C ABI over one of kernel.cu's objects: fills FlashAttention-3's Flash_fwd_params from raw device pointers
// and element strides the way FA3's mha_fwd does for a variable-length self-attention call (cu_seqlens for both
// q and k, no paging, no split, non-causal), then calls that object's kernel on the caller's stream. Compiled once
// per configuration with the same -D options as kernel.cu (only flash.h is read: seconds, not minutes). Exports
//   int vd_fa3_<name>(q, k, v, out, lse, cu_seqlens, sequences, rows, longest, heads_q, heads_kv,
//                     q_row, q_head, k_row, k_head, v_row, v_head, o_row, o_head, scale, metadata, metadata_ints,
//                     sms, stream) -> 0 or a VdFa3Status
//   int vd_fa3_metadata_ints(sequences)   (the int32 scratch FA3's varlen scheduler needs, per call site)
// FA3 itself ends the process (exit(1), after a message on stderr) when a CUDA call inside it fails.
#include <cuda_runtime.h>

#include <cstdint>

#include "flash.h"
#include "status.h"

#if !defined(VD_NAME) || !defined(VD_E4M3) || !defined(VD_PACKGQA)
#error "build.py passes VD_NAME, VD_E4M3, VD_PACKGQA"
#endif

#define VD_CAT2(a, b) a##b
#define VD_CAT(a, b) VD_CAT2(a, b)
#define VD_FN VD_CAT(vd_fa3_, VD_NAME)

void VD_CAT(vd_fa3_run_, VD_NAME)(Flash_fwd_params& params, cudaStream_t stream);  // kernel.cu

namespace {
constexpr int kHeadDim = 128;  // the only head size kernel.cu is instantiated for
constexpr int kAlignBytes = 16;  // TMA: 16-byte aligned base addresses and row/head strides
int round_up(int x, int m) { return (x + m - 1) / m * m; }
bool aligned(const void* p) { return reinterpret_cast<std::uintptr_t>(p) % kAlignBytes == 0; }
}  // namespace

// FA3's layout of the scheduler scratch (flash_api.cpp, mha_fwd): num_splits_dynamic, num_m_blocks and the
// sorted batch order, b rounded up to 4 ints each, then the tile semaphore (its prepare kernel zeroes it).
extern "C" __attribute__((weak)) int vd_fa3_metadata_ints(int sequences) { return 3 * round_up(sequences, 4) + 1; }

extern "C" int VD_FN(const void* q, const void* k, const void* v, void* out, float* lse, const int* cu_seqlens,
                     int sequences, int rows, int longest, int heads_q, int heads_kv, int64_t q_row, int64_t q_head,
                     int64_t k_row, int64_t k_head, int64_t v_row, int64_t v_head, int64_t o_row, int64_t o_head,
                     float scale, int* metadata, int metadata_ints, int sms, cudaStream_t stream) {
  const int element_bytes = VD_E4M3 ? 1 : 2;
  if (sequences <= 0 || rows <= 0 || longest <= 0 || longest > rows || heads_kv <= 0 || heads_q % heads_kv || sms <= 0)
    return VD_FA3_BAD_ARGUMENT;
  for (int64_t stride : {q_row, q_head, k_row, k_head, v_row, v_head})
    if (stride <= 0 || stride * element_bytes % kAlignBytes) return VD_FA3_MISALIGNED;
  if (o_row <= 0 || o_head <= 0 || o_row * 2 % kAlignBytes || o_head * 2 % kAlignBytes) return VD_FA3_MISALIGNED;
  for (const void* p : {q, k, v, static_cast<const void*>(out)})
    if (!aligned(p)) return VD_FA3_MISALIGNED;
  if (metadata_ints < vd_fa3_metadata_ints(sequences)) return VD_FA3_METADATA_TOO_SMALL;

  Flash_fwd_params params = {};
  params.is_e4m3 = VD_E4M3;
  params.is_bf16 = false;
  params.q_ptr = const_cast<void*>(q);
  params.k_ptr = const_cast<void*>(k);
  params.v_ptr = const_cast<void*>(v);
  params.o_ptr = out;
  params.q_row_stride = q_row, params.q_head_stride = q_head;
  params.k_row_stride = k_row, params.k_head_stride = k_head;
  params.v_row_stride = v_row, params.v_head_stride = v_head, params.v_dim_stride = 1;
  params.o_row_stride = o_row, params.o_head_stride = o_head;
  params.cu_seqlens_q = params.cu_seqlens_k = const_cast<int*>(cu_seqlens);
  params.softmax_lse_ptr = lse;  // [heads_q, rows] fp32: FA3's epilogue always writes it
  params.b = params.b_k = sequences;
  params.h = heads_q, params.h_k = heads_kv;
  params.seqlen_q = params.seqlen_k = longest;
  params.seqlen_q_rounded = params.seqlen_k_rounded = round_up(longest, 128);
  params.total_q = params.total_k = rows;
  params.d = params.d_rounded = params.dv = params.dv_rounded = kHeadDim;
  params.scale_softmax = scale;
  params.p_dropout = 1.f, params.rp_dropout = 1.f, params.p_dropout_in_uint8_t = 255;
  params.window_size_left = params.window_size_right = longest - 1;  // what set_params_fprop makes of (-1, -1)
  params.page_size = 1;
  params.arch = 90, params.num_sm = sms;
  params.num_splits = 1;
  params.pack_gqa = VD_PACKGQA;
  params.varlen_sort_batches = true, params.head_swizzle = false;  // non-causal, non-local
  params.prepare_varlen_pdl = sequences <= 992;  // flash_api.cpp's PREPARE_VARLEN_MAX_BATCHES_1CTA
  const int b_rounded = round_up(sequences, 4);
  params.num_splits_dynamic_ptr = metadata;
  params.num_m_blocks_ptr = metadata + b_rounded;
  params.varlen_batch_idx_ptr = metadata + 2 * b_rounded;
  params.tile_count_semaphore = metadata + 3 * b_rounded;
  params.tile_count_semaphore_offset = 3 * b_rounded;
  VD_CAT(vd_fa3_run_, VD_NAME)(params, stream);
  return cudaPeekAtLastError() == cudaSuccess ? VD_FA3_OK : VD_FA3_LAUNCH_FAILED;
}
