/* ncclep_abi.h - the part of NCCL EP's C interface (libnccl_ep.so, the
 * expert-parallel extension of NCCL, API version 2) that the NCCL_EP
 * transport calls, declared here from its documented ABI so that libfp8kit
 * builds without NCCL EP's header and loads the library at run time
 * (ncclep.c). Every struct starts with its byte size and a magic word, which
 * the library checks: a library with another layout refuses the call rather
 * than misreading it. The sizes below are the ones NCCL EP documents for
 * these versions of the structs. */
#ifndef FK_EP_NCCLEP_ABI_H
#define FK_EP_NCCLEP_ABI_H

#include <stddef.h>
#include <stdint.h>
#include <cuda_runtime_api.h>
#include <nccl.h>

#define FK_NEP_MAGIC 0xC00FFFEEu        /* every config / argument struct */
#define FK_NEP_TENSOR_MAGIC 0xCAFECAFEu /* a caller-made tensor descriptor */
#define FK_NEP_API_VERSION 2u

enum { FK_NEP_ALGO_LOW_LATENCY = 0, FK_NEP_ALGO_HIGH_THROUGHPUT = 1 };
enum { FK_NEP_LAYOUT_EXPERT_MAJOR = 1 };
enum { FK_NEP_DISP_QUANT_FWD = 1 };

typedef struct fk_nep_group *fk_nep_group_t;
typedef struct fk_nep_handle *fk_nep_handle_t;

/* A tensor: a device pointer with its dims (dense, row-major). */
typedef struct fk_nep_tensor {
    unsigned int size, magic;
    unsigned int ndim;
    ncclDataType_t dtype;
    void *data;
    void *window;         /* an NCCL window; NULL for a plain device pointer */
    uint64_t window_offset;
    size_t *dims;         /* ndim sizes, owned by the caller */
} fk_nep_tensor;

typedef struct fk_nep_alloc {
    void *alloc_fn, *free_fn, *context; /* all NULL: cudaMalloc / cudaFree */
} fk_nep_alloc;

typedef struct fk_nep_group_config {
    unsigned int size, magic, version;
    int algorithm;
    unsigned int num_experts;
    unsigned int max_tokens_per_rank;
    unsigned int max_recv_tokens_per_rank; /* low latency: 0; high throughput: the receive slots (static) */
    unsigned int max_token_bytes;          /* a token's bytes, dispatch or combine, whichever is larger */
    unsigned long rdma_buffer_size;        /* 0: sized by the library */
    unsigned int num_qp_per_rank, num_channels, max_num_sms;
    fk_nep_alloc alloc;
    unsigned int enable_mask;
    uint64_t timeout_ns;
    int zero_copy, overflow_policy;
    unsigned int num_topk;
    unsigned char pad[4];
} fk_nep_group_config;

typedef struct fk_nep_layout_info {
    unsigned int size, magic;
    fk_nep_tensor *expert_counters; /* expert-major: per local expert received rows (low latency int32, at
                                       dispatch; high throughput int64, at the handle update) */
    fk_nep_tensor *src_rank_counters, *expert_offsets, *recv_total_counter;
    int recv_topk_idx_kind;
    unsigned char pad[4];
} fk_nep_layout_info;

typedef struct fk_nep_dispatch_in {
    unsigned int size, magic;
    fk_nep_tensor *tokens, *topk_weights, *scales;
} fk_nep_dispatch_in;

typedef struct fk_nep_dispatch_out {
    unsigned int size, magic;
    fk_nep_tensor *tokens, *topk_weights, *scales, *topk_idx;
} fk_nep_dispatch_out;

typedef struct fk_nep_dispatch_config {
    unsigned int size, magic;
    unsigned int send_only, round_scales;
    int pass_direction;
    int quant_recipe;
} fk_nep_dispatch_config;

typedef struct fk_nep_combine_in {
    unsigned int size, magic;
    fk_nep_tensor *tokens, *topk_weights, *scales;
} fk_nep_combine_in;

typedef struct fk_nep_combine_out {
    unsigned int size, magic;
    fk_nep_tensor *tokens, *topk_weights;
} fk_nep_combine_out;

#ifdef __cplusplus
#define FK_NEP_ASSERT(c, m) static_assert(c, m)
#else
#define FK_NEP_ASSERT(c, m) _Static_assert(c, m)
#endif
FK_NEP_ASSERT(sizeof(fk_nep_tensor) == 48, "NCCL EP tensor: 48 bytes");
FK_NEP_ASSERT(sizeof(fk_nep_group_config) == 112, "NCCL EP group config, version 2: 112 bytes");
FK_NEP_ASSERT(offsetof(fk_nep_group_config, timeout_ns) == 88, "NCCL EP group config layout");
FK_NEP_ASSERT(sizeof(fk_nep_layout_info) == 48, "NCCL EP layout info, version 2: 48 bytes");
FK_NEP_ASSERT(sizeof(fk_nep_dispatch_in) == 32, "NCCL EP dispatch inputs: 32 bytes");
FK_NEP_ASSERT(sizeof(fk_nep_dispatch_out) == 40, "NCCL EP dispatch outputs: 40 bytes");
FK_NEP_ASSERT(sizeof(fk_nep_dispatch_config) == 24, "NCCL EP dispatch config, version 2: 24 bytes");
FK_NEP_ASSERT(sizeof(fk_nep_combine_in) == 32, "NCCL EP combine inputs, version 2: 32 bytes");
FK_NEP_ASSERT(sizeof(fk_nep_combine_out) == 24, "NCCL EP combine outputs: 24 bytes");

/* The functions, as looked up in libnccl_ep.so. */
typedef struct fk_nep_fns {
    int version; /* the library's version code: major x 10000 + minor x 100 + patch */
    ncclResult_t (*GetVersion)(int *version);
    ncclResult_t (*CreateGroup)(fk_nep_group_t *group, ncclComm_t comm, const fk_nep_group_config *cfg);
    ncclResult_t (*GroupDestroy)(fk_nep_group_t group);
    ncclResult_t (*InitHandle)(fk_nep_handle_t *handle, fk_nep_group_t group, int layout, const void *handle_cfg,
                               int num_topk, const fk_nep_tensor *handle_mem);
    ncclResult_t (*UpdateHandle)(fk_nep_handle_t handle, const fk_nep_tensor *topk_idx,
                                 const fk_nep_layout_info *info, cudaStream_t stream);
    ncclResult_t (*HandleDestroy)(fk_nep_handle_t handle);
    ncclResult_t (*Dispatch)(fk_nep_handle_t handle, const fk_nep_dispatch_in *in, const fk_nep_dispatch_out *out,
                             const fk_nep_layout_info *info, const fk_nep_dispatch_config *cfg, cudaStream_t stream);
    ncclResult_t (*Combine)(fk_nep_handle_t handle, const fk_nep_combine_in *in, const fk_nep_combine_out *out,
                            const void *cfg, cudaStream_t stream);
} fk_nep_fns;

#endif
