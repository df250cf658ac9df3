// The return codes of entry.cu's functions and their names (vd_fa3_status_string, weak: every object has one).
#pragma once
enum VdFa3Status {
  VD_FA3_OK = 0,
  VD_FA3_BAD_ARGUMENT = 1,
  VD_FA3_MISALIGNED = 2,
  VD_FA3_METADATA_TOO_SMALL = 3,
  VD_FA3_LAUNCH_FAILED = 4,
};

extern "C" __attribute__((weak)) const char* vd_fa3_status_string(int status) {
  switch (status) {
    case VD_FA3_OK: return "ok";
    case VD_FA3_BAD_ARGUMENT: return "bad argument (a size <= 0, longest > rows, or heads_q not a multiple of heads_kv)";
    case VD_FA3_MISALIGNED: return "a pointer or stride is not 16-byte aligned (TMA needs it)";
    case VD_FA3_METADATA_TOO_SMALL: return "metadata smaller than vd_fa3_metadata_ints(sequences)";
    case VD_FA3_LAUNCH_FAILED: return "the kernel launch failed";
    default: return "unknown status";
  }
}
