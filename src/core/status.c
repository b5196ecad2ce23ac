/* status.c - descriptions of statuses, dtype sizes and the version (the enums' names: names.c). */
#include "core/internal.h"

const char *fp8kit_status_string(fp8kit_status st)
{
    switch (st) {
    case FP8KIT_OK: return "FP8KIT_OK: success";
    case FP8KIT_ERR_NULL_POINTER: return "FP8KIT_ERR_NULL_POINTER: a required pointer is NULL";
    case FP8KIT_ERR_INVALID_ARGUMENT: return "FP8KIT_ERR_INVALID_ARGUMENT: an argument is out of range";
    case FP8KIT_ERR_INVALID_SHAPE: return "FP8KIT_ERR_INVALID_SHAPE: shapes disagree or break a scheme's rule";
    case FP8KIT_ERR_SIZE_OVERFLOW: return "FP8KIT_ERR_SIZE_OVERFLOW: a dimension is negative or a size overflows";
    case FP8KIT_ERR_INVALID_STRIDE: return "FP8KIT_ERR_INVALID_STRIDE: strides are not row-major with contiguous rows";
    case FP8KIT_ERR_MISALIGNED: return "FP8KIT_ERR_MISALIGNED: a pointer or leading dimension is not aligned as required";
    case FP8KIT_ERR_UNSUPPORTED: return "FP8KIT_ERR_UNSUPPORTED: this combination of dtypes and options is not supported";
    case FP8KIT_ERR_BACKEND_UNAVAILABLE: return "FP8KIT_ERR_BACKEND_UNAVAILABLE: the backend is not built in or has no usable device";
    case FP8KIT_ERR_ARCH_MISMATCH: return "FP8KIT_ERR_ARCH_MISMATCH: the device architecture lacks a required feature";
    case FP8KIT_ERR_DEVICE: return "FP8KIT_ERR_DEVICE: a CUDA call failed";
    case FP8KIT_ERR_OUT_OF_MEMORY: return "FP8KIT_ERR_OUT_OF_MEMORY: out of memory";
    case FP8KIT_ERR_WORKSPACE_TOO_SMALL: return "FP8KIT_ERR_WORKSPACE_TOO_SMALL: the workspace is smaller than required";
    case FP8KIT_ERR_IO: return "FP8KIT_ERR_IO: a file could not be read or written";
    case FP8KIT_ERR_CORRUPT_FILE: return "FP8KIT_ERR_CORRUPT_FILE: a file's contents break its format";
    case FP8KIT_ERR_INTERNAL: return "FP8KIT_ERR_INTERNAL: internal error";
    }
    return "FP8KIT_ERR_UNKNOWN: not a valid fp8kit_status value";
}

/* The version is defined once, by the FP8KIT_VERSION_* macros of fp8kit.h
 * (CMake and the Python package read it from there). */
#define FK_STR_(x) #x
#define FK_STR(x) FK_STR_(x)
const char *fp8kit_version_string(void)
{
    return FK_STR(FP8KIT_VERSION_MAJOR) "." FK_STR(FP8KIT_VERSION_MINOR) "." FK_STR(FP8KIT_VERSION_PATCH);
}

int fp8kit_version(void)
{
    return FP8KIT_VERSION_MAJOR * 10000 + FP8KIT_VERSION_MINOR * 100 + FP8KIT_VERSION_PATCH;
}

size_t fp8kit_dtype_size(fp8kit_dtype t)
{
    if ((unsigned)t >= FP8KIT_DTYPE_COUNT)
        return 0;
    return fk_dtype_bytes(t);
}

