// The return codes of gemm.cu's functions and their names (vd_gemm_status_string, weak: every object has one).
#pragma once
enum VdStatus {
  VD_OK = 0,
  VD_BAD_ARGUMENT = 1,
  VD_CANNOT_IMPLEMENT = 2,
  VD_WORKSPACE_TOO_SMALL = 3,
  VD_INITIALIZE_FAILED = 4,
  VD_LAUNCH_FAILED = 5,
  VD_NO_DEVICE = 6,
};

extern "C" __attribute__((weak)) const char* vd_gemm_status_string(int status) {
  switch (status) {
    case VD_OK: return "ok";
    case VD_BAD_ARGUMENT: return "bad argument (a size <= 0, or splits != 1 without a stream-K scheduler)";
    case VD_CANNOT_IMPLEMENT: return "CUTLASS cannot implement it (K and N must be multiples of 8)";
    case VD_WORKSPACE_TOO_SMALL: return "workspace too small";
    case VD_INITIALIZE_FAILED: return "CUTLASS's initialize failed";
    case VD_LAUNCH_FAILED: return "the kernel launch failed";
    case VD_NO_DEVICE: return "no CUDA device";
    default: return "unknown status";
  }
}
