// W4A4 GEMM on INT4 tensor cores (mma.sync m16n8k64 s4, SASS IMMA.16864.S4.S4 on sm_80/86/87/89).
//
//   out[m, n] = sum_g dot_g(m, n) * act_scales[m, g] * wgt_scales[n, g]      (fp32; dot_g exact int32)
//             + lowrank_act[m, :] . lowrank_up[n, :]                          (fp16 MMA, fp32 accumulate)
//             + bias[n] + residual[m, n]                                      (optional)
//
// One m16n8k64 MMA covers exactly one 64-wide scale group, so its int32 result *is* the group sum and
// is folded into the fp32 accumulator right away. Both operands use the "group-halves" packing of
// kernels/w4a4_ref.py; the fragments are loaded as raw 32-bit words, which permutes K inside a group
// identically for A and B, and a dot product does not care about the order of its terms.
//
// Compiled at run time by NVRTC (kernels/w4a4_cuda.py) with the -D options below; it includes no
// header so it builds with NVRTC alone. Requires K % 64 == 0 and 16-byte aligned code rows.

#ifndef W4A4_BM
#define W4A4_BM 128  // CTA tile rows (tokens)
#endif
#ifndef W4A4_BN
#define W4A4_BN 128  // CTA tile columns (output channels)
#endif
#ifndef W4A4_WARPS_M
#define W4A4_WARPS_M 2
#endif
#ifndef W4A4_WARPS_N
#define W4A4_WARPS_N 4
#endif
#ifndef W4A4_RANK
#define W4A4_RANK 32  // low-rank dimension, a multiple of 16
#endif
#ifndef W4A4_OUT_F16
#define W4A4_OUT_F16 1  // 1: out/bias/residual are fp16, 0: fp32
#endif

typedef unsigned int u32;
typedef unsigned short u16;

constexpr int BM = W4A4_BM, BN = W4A4_BN, RANK = W4A4_RANK;
constexpr int WARPS_M = W4A4_WARPS_M, WARPS_N = W4A4_WARPS_N;
constexpr int THREADS = WARPS_M * WARPS_N * 32;
constexpr int WM = BM / WARPS_M, WN = BN / WARPS_N;  // warp tile
constexpr int MT = WM / 16, NT = WN / 8;             // m16 x n8 MMA tiles per warp
constexpr int GROUP_BYTES = 32;                      // 64 int4 codes
constexpr int ROW_STRIDE = 48;                       // smem bytes per row: 32 + 16 pad, ldmatrix conflict-free
constexpr int STAGES = 3;

static_assert(WM % 16 == 0 && WN % 16 == 0, "warp tile must be a multiple of 16 x 16");
static_assert(RANK % 16 == 0, "rank must be a multiple of 16");

#if W4A4_OUT_F16
typedef u16 out_t;
#else
typedef float out_t;
#endif

__device__ __forceinline__ float half_to_float(u16 h) {
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
  return f;
}

__device__ __forceinline__ u16 float_to_half(float f) {
  u16 h;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
  return h;
}

__device__ __forceinline__ float load_out_t(const out_t* p) {
#if W4A4_OUT_F16
  return half_to_float(*p);
#else
  return *p;
#endif
}

__device__ __forceinline__ void store_out_t(out_t* p, float v) {
#if W4A4_OUT_F16
  *p = float_to_half(v);
#else
  *p = v;
#endif
}

// Exact int32 -> fp32 for |v| < 2^22 with two full-rate ops (I2F runs at quarter rate on sm_8x).
__device__ __forceinline__ float exact_int_to_float(int v) {
  float f;
  asm("mov.b32 %0, %1;" : "=f"(f) : "r"(v + 0x4B400000));
  return f - 12582912.0f;
}

__device__ __forceinline__ u32 shared_address(const void* p) {
  u32 a;
  asm("{ .reg .u64 t; cvta.to.shared.u64 t, %1; cvt.u32.u64 %0, t; }" : "=r"(a) : "l"(p));
  return a;
}

// Asynchronous global -> shared copies; a zero source size fills zeros (rows past M or N).
__device__ __forceinline__ void copy_async16(u32 dst, const void* src, bool valid) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(dst), "l"(src), "r"(valid ? 16 : 0));
}

__device__ __forceinline__ void copy_async4(u32 dst, const void* src, bool valid) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;" ::"r"(dst), "l"(src), "r"(valid ? 4 : 0));
}

__device__ __forceinline__ void copy_async_commit() { asm volatile("cp.async.commit_group;"); }

template <int PENDING>
__device__ __forceinline__ void copy_async_wait() {
  asm volatile("cp.async.wait_group %0;" ::"n"(PENDING));
}

__device__ __forceinline__ void load_matrix_x4(u32 (&r)[4], u32 address) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(address));
}

// d = A (16x64 s4, row) * B (64x8 s4, col): the int32 dot products of one 64-group.
__device__ __forceinline__ void mma_s4(int (&d)[4], const u32 (&a)[4], const u32 (&b)[2]) {
  asm volatile(
      "mma.sync.aligned.m16n8k64.row.col.s32.s4.s4.s32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%10, %10, %10, %10};"
      : "=r"(d[0]), "=r"(d[1]), "=r"(d[2]), "=r"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "r"(0));
}

// c += A (16x16 f16, row) * B (16x8 f16, col) in fp32.
__device__ __forceinline__ void mma_f16(float (&c)[4], const u32 (&a)[4], const u32 (&b)[2]) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

__device__ __forceinline__ u32 pack_half2(float lo, float hi) {
  return (u32)float_to_half(lo) | ((u32)float_to_half(hi) << 16);  // low half = lower k index
}

struct Tiles {
  unsigned char act[STAGES][BM * ROW_STRIDE];
  unsigned char wgt[STAGES][BN * ROW_STRIDE];
  float act_scales[STAGES][BM];
  float wgt_scales[STAGES][BN];
};

// Stage `stage` <- group g of the CTA's BM code rows, BN weight rows and their scales.
__device__ __forceinline__ void load_group(Tiles& t, int stage, int g, const unsigned char* act,
                                           const float* act_scales, const unsigned char* wgt,
                                           const float* wgt_scales, int m0, int n0, int M, int N, int K) {
  const int row_bytes = K / 2, groups = K / 64;
  for (int c = threadIdx.x; c < (BM + BN) * 2; c += THREADS) {
    const int row = c >> 1, half = c & 1;  // two 16-byte chunks per row
    if (row < BM) {
      const int m = m0 + row;
      const bool ok = m < M;
      copy_async16(shared_address(&t.act[stage][row * ROW_STRIDE + half * 16]),
                   act + (long long)(ok ? m : 0) * row_bytes + g * GROUP_BYTES + half * 16, ok);
    } else {
      const int n = n0 + row - BM;
      const bool ok = n < N;
      copy_async16(shared_address(&t.wgt[stage][(row - BM) * ROW_STRIDE + half * 16]),
                   wgt + (long long)(ok ? n : 0) * row_bytes + g * GROUP_BYTES + half * 16, ok);
    }
  }
  for (int i = threadIdx.x; i < BM + BN; i += THREADS) {
    if (i < BM) {
      const int m = m0 + i;
      const bool ok = m < M;
      copy_async4(shared_address(&t.act_scales[stage][i]), act_scales + (long long)(ok ? m : 0) * groups + g, ok);
    } else {
      const int n = n0 + i - BM;
      const bool ok = n < N;
      copy_async4(shared_address(&t.wgt_scales[stage][i - BM]), wgt_scales + (long long)(ok ? n : 0) * groups + g,
                  ok);
    }
  }
}

extern "C" __global__ void __launch_bounds__(THREADS)
w4a4_gemm(const unsigned char* __restrict__ act,  // [M, K/2] packed int4
          const float* __restrict__ act_scales,   // [M, K/64]
          const unsigned char* __restrict__ wgt,  // [N, K/2] packed int4
          const float* __restrict__ wgt_scales,   // [N, K/64]
          const float* __restrict__ lowrank_act,  // [M, RANK] fp32
          const u16* __restrict__ lowrank_up,     // [N, RANK] fp16
          const out_t* __restrict__ bias,         // [N] or null
          const out_t* __restrict__ residual,     // [M, N] or null
          out_t* __restrict__ out,                // [M, N]
          int* __restrict__ group_sums,           // [M, N, K/64] or null: the int32 group sums, for tests
          int M, int N, int K) {
  __shared__ __align__(16) Tiles tiles;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int gid = lane >> 2, tig = lane & 3;  // MMA fragment coordinates
  const int warp_m = warp / WARPS_N, warp_n = warp % WARPS_N;
  const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;
  const int groups = K / 64;

  float acc[MT][NT][4];
#pragma unroll
  for (int i = 0; i < MT; ++i)
#pragma unroll
    for (int j = 0; j < NT; ++j)
#pragma unroll
      for (int r = 0; r < 4; ++r) acc[i][j][r] = 0.0f;

#pragma unroll
  for (int s = 0; s < STAGES - 1; ++s) {
    if (s < groups) load_group(tiles, s, s, act, act_scales, wgt, wgt_scales, m0, n0, M, N, K);
    copy_async_commit();
  }

  for (int g = 0; g < groups; ++g) {
    copy_async_wait<STAGES - 2>();  // group g has landed
    __syncthreads();                // ... for every thread, and stage (g - 1) is free again
    const int next = g + STAGES - 1;
    if (next < groups) load_group(tiles, next % STAGES, next, act, act_scales, wgt, wgt_scales, m0, n0, M, N, K);
    copy_async_commit();
    const int st = g % STAGES;

    // A: matrices (rows 0-7 | 8-15) x (bytes 0-15 | 16-31) -> a0..a3; B: (bytes 0-15 | 16-31) -> b0, b1.
    u32 a[MT][4];
#pragma unroll
    for (int i = 0; i < MT; ++i) {
      const int row = warp_m * WM + i * 16 + (lane & 7) + ((lane >> 3) & 1) * 8;
      load_matrix_x4(a[i], shared_address(&tiles.act[st][row * ROW_STRIDE + (lane >> 4) * 16]));
    }
    u32 b[NT][2];
#pragma unroll
    for (int j = 0; j < NT; j += 2) {
      const int row = warp_n * WN + j * 8 + (lane & 7) + (lane >> 4) * 8;
      u32 r[4];
      load_matrix_x4(r, shared_address(&tiles.wgt[st][row * ROW_STRIDE + ((lane >> 3) & 1) * 16]));
      b[j][0] = r[0];
      b[j][1] = r[1];
      b[j + 1][0] = r[2];
      b[j + 1][1] = r[3];
    }
    float sa[MT][2], sw[NT][2];
#pragma unroll
    for (int i = 0; i < MT; ++i) {
      sa[i][0] = tiles.act_scales[st][warp_m * WM + i * 16 + gid];
      sa[i][1] = tiles.act_scales[st][warp_m * WM + i * 16 + gid + 8];
    }
#pragma unroll
    for (int j = 0; j < NT; ++j) {
      sw[j][0] = tiles.wgt_scales[st][warp_n * WN + j * 8 + tig * 2];
      sw[j][1] = tiles.wgt_scales[st][warp_n * WN + j * 8 + tig * 2 + 1];
    }

#pragma unroll
    for (int i = 0; i < MT; ++i)
#pragma unroll
      for (int j = 0; j < NT; ++j) {
        int d[4];
        mma_s4(d, a[i], b[j]);
#pragma unroll
        for (int r = 0; r < 4; ++r) {  // d[r] is (row gid + 8 * (r / 2), column 2 * tig + r % 2)
          acc[i][j][r] = fmaf(exact_int_to_float(d[r]) * sa[i][r >> 1], sw[j][r & 1], acc[i][j][r]);
        }
        if (group_sums != nullptr) {
#pragma unroll
          for (int r = 0; r < 4; ++r) {
            const int m = m0 + warp_m * WM + i * 16 + gid + (r >> 1) * 8;
            const int n = n0 + warp_n * WN + j * 8 + tig * 2 + (r & 1);
            if (m < M && n < N) group_sums[((long long)m * N + n) * groups + g] = d[r];
          }
        }
      }
  }

  // Low-rank up projection on fp16 tensor cores, accumulated into the same fp32 tile.
#pragma unroll
  for (int k0 = 0; k0 < RANK; k0 += 16) {
    u32 la[MT][4];
#pragma unroll
    for (int i = 0; i < MT; ++i) {
#pragma unroll
      for (int r = 0; r < 4; ++r) {  // a0: (gid, k), a1: (gid + 8, k), a2: (gid, k + 8), a3: (gid + 8, k + 8)
        const int m = m0 + warp_m * WM + i * 16 + gid + (r & 1) * 8;
        const int k = k0 + tig * 2 + (r >> 1) * 8;
        const float* p = lowrank_act + (long long)m * RANK + k;
        la[i][r] = m < M ? pack_half2(p[0], p[1]) : 0u;
      }
    }
#pragma unroll
    for (int j = 0; j < NT; ++j) {
      const int n = n0 + warp_n * WN + j * 8 + gid;
      u32 up[2];
#pragma unroll
      for (int r = 0; r < 2; ++r) {  // b0: k = 2 tig .. +1, b1: k + 8
        const u16* p = lowrank_up + (long long)n * RANK + k0 + tig * 2 + r * 8;
        up[r] = n < N ? (u32)p[0] | ((u32)p[1] << 16) : 0u;
      }
#pragma unroll
      for (int i = 0; i < MT; ++i) mma_f16(acc[i][j], la[i], up);
    }
  }

#pragma unroll
  for (int i = 0; i < MT; ++i)
#pragma unroll
    for (int j = 0; j < NT; ++j)
#pragma unroll
      for (int r = 0; r < 4; ++r) {
        const int m = m0 + warp_m * WM + i * 16 + gid + (r >> 1) * 8;
        const int n = n0 + warp_n * WN + j * 8 + tig * 2 + (r & 1);
        if (m < M && n < N) {
          float v = acc[i][j][r];
          if (bias != nullptr) v += load_out_t(bias + n);
          if (residual != nullptr) v += load_out_t(residual + (long long)m * N + n);
          store_out_t(out + (long long)m * N + n, v);
        }
      }
}
