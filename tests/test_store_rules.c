/* test_store_rules.c - what each store path of the CUDA GEMM epilogue asks
 * of a job's D (src/cuda/gemm/store_rules.h), which needs no GPU: from a
 * job every rule accepts, each condition broken alone must turn the rule
 * down; the K-grouped GEMM's pick; and the families' sets of paths. */
#include <stdio.h>
#include <string.h>
#include "cuda/gemm/store_rules.h"
#include "test_util.h"

/* 16-byte aligned stand-ins for D, C and the bias (never dereferenced). */
static _Alignas(16) unsigned char g_mem[3][64];

/* bf16 D, no C, no bias or activation: the 16-bit bulk and TMA-store paths take it. */
static fk_gemm_job d16_job(void)
{
    fk_gemm_job j;
    memset(&j, 0, sizeof j);
    j.m = 256;
    j.n = 512;
    j.k = 256;
    j.d = g_mem[0];
    j.d_type = FP8KIT_BF16;
    j.ldd = 520;
    j.desc.out_quant = FP8KIT_OUTQ_NONE;
    j.desc.act = FP8KIT_ACT_NONE;
    j.desc.bias = FP8KIT_BIAS_NONE;
    j.desc.scale_b = FP8KIT_SCALE_TENSOR;
    j.alpha = 1.0f;
    return j;
}

/* fp32 D += in place (beta 1, C is D): the reduce-add path takes it. */
static fk_gemm_job d32_add_job(void)
{
    fk_gemm_job j = d16_job();
    j.d_type = FP8KIT_F32;
    j.ldd = 516;
    j.c = j.d;
    j.c_type = FP8KIT_F32;
    j.ldc = j.ldd;
    j.beta = 1.0f;
    return j;
}

static void d16_rules(void)
{
    fk_gemm_job j = d16_job();
    CHECK(fk_d16_copyable(&j) && fk_tma_store_ok(&j) && fk_tma_store_kind(&j) == 1, "bf16 D: copyable, TMA store, kind 1");
    j.d_type = FP8KIT_F16;
    CHECK(fk_d16_copyable(&j), "f16 D: copyable");
    j = d16_job();
    j.d_type = FP8KIT_F32;
    CHECK(!fk_d16_copyable(&j) && !fk_tma_store_ok(&j), "f32 D: not a 16-bit copy");
    j = d16_job();
    j.c = g_mem[1];
    j.c_type = FP8KIT_BF16;
    j.beta = 0.5f;
    CHECK(!fk_d16_copyable(&j), "with C: not copyable");
    j = d16_job();
    j.desc.out_quant = FP8KIT_OUTQ_MX;
    CHECK(!fk_d16_copyable(&j), "output quantization: not copyable");
    j = d16_job();
    j.d = g_mem[0] + 8;
    CHECK(!fk_d16_copyable(&j), "D 8-byte aligned: not copyable");
    j = d16_job();
    j.ldd = 516;
    CHECK(!fk_d16_copyable(&j), "row stride 516: not copyable");
    j = d16_job();
    j.n = 500;
    CHECK(fk_d16_copyable(&j) && !fk_tma_store_ok(&j), "N 500: copyable, but no TMA store (a row's end clips to 16 bytes)");
    j = d16_job();
    j.bias = g_mem[2];
    j.bias_type = FP8KIT_F32;
    j.desc.bias = FP8KIT_BIAS_COL;
    CHECK(fk_tma_store_ok(&j) && fk_tma_store_kind(&j) == 2, "column bias: TMA store, kind 2");
    j.bias = g_mem[2] + 2;
    CHECK(!fk_tma_store_ok(&j), "column bias on a 2-byte boundary: no TMA store");
    j.bias = g_mem[2];
    j.desc.scale_b = FP8KIT_SCALE_ROW;
    CHECK(!fk_tma_store_ok(&j), "column bias with row-scaled B: no TMA store");
    j.desc.scale_b = FP8KIT_SCALE_TENSOR;
    j.desc.bias = FP8KIT_BIAS_ROW;
    CHECK(!fk_tma_store_ok(&j), "row bias: no TMA store");
    j = d16_job();
    j.desc.act = FP8KIT_ACT_GELU_TANH;
    CHECK(fk_tma_store_ok(&j) && fk_tma_store_kind(&j) == 2, "activation: TMA store, kind 2");
}

static void reduce_rules(void)
{
    fk_gemm_job j = d32_add_job();
    CHECK(fk_job_reducible(&j), "fp32 D += in place: reduce-add");
    CHECK(fk_d32_reducible(FP8KIT_F32, g_mem[0], 8, g_mem[0], 8, 1.0f, 4, 1), "the rule itself: 4 x 8 fp32");
    j.beta = 0.5f;
    CHECK(!fk_job_reducible(&j), "beta 0.5: not a plain add");
    j = d32_add_job();
    j.c = g_mem[1];
    CHECK(!fk_job_reducible(&j), "C another matrix: not in place");
    j = d32_add_job();
    j.c = NULL;
    j.beta = 0.0f;
    CHECK(!fk_job_reducible(&j), "no C: nothing to add to");
    j = d32_add_job();
    j.ldc = j.ldd + 4;
    CHECK(!fk_job_reducible(&j), "C's row stride differs: not in place");
    j = d32_add_job();
    j.c_type = FP8KIT_BF16;
    CHECK(!fk_job_reducible(&j), "C in bf16: not an fp32 add");
    j = d32_add_job();
    j.d_type = FP8KIT_BF16;
    CHECK(!fk_job_reducible(&j), "bf16 D: not an fp32 add");
    j = d32_add_job();
    j.d = g_mem[0] + 4;
    j.c = j.d;
    CHECK(!fk_job_reducible(&j), "D 4-byte aligned: no bulk copy");
    j = d32_add_job();
    j.ldd = j.ldc = 514;
    CHECK(!fk_job_reducible(&j), "row stride 514: rows not 16-byte aligned");
    j = d32_add_job();
    j.n = 258;
    CHECK(!fk_job_reducible(&j), "N 258: a row's bytes not a multiple of 16");
    j = d32_add_job();
    j.bias = g_mem[2];
    j.bias_type = FP8KIT_F32;
    j.desc.bias = FP8KIT_BIAS_COL;
    CHECK(!fk_job_reducible(&j), "a bias: not a plain add");
    j = d32_add_job();
    j.desc.act = FP8KIT_ACT_RELU;
    CHECK(!fk_job_reducible(&j), "an activation: not a plain add");
    j = d32_add_job();
    j.desc.out_quant = FP8KIT_OUTQ_BLOCK1X128;
    CHECK(!fk_job_reducible(&j), "output quantization: not a plain add");
}

/* The K-grouped GEMM's D: 4 groups of 256 x 512. */
static fk_k_grouped_job kg_job(fp8kit_dtype dt, float beta)
{
    fk_k_grouped_job j;
    memset(&j, 0, sizeof j);
    j.groups = 4;
    j.m = 256;
    j.n = 512;
    j.ktot = 1024;
    j.d = g_mem[0];
    j.d_type = dt;
    j.ldd = 512;
    j.sdg = 256 * 512;
    j.alpha = 1.0f;
    j.beta = beta;
    return j;
}

static void kg_rules(void)
{
    fk_k_grouped_job j = kg_job(FP8KIT_F32, 1.0f);
    CHECK(fk_kg_store_pick(&j, 1) == FK_STORE_REDUCE, "fp32 D += : reduce-add");
    CHECK(fk_kg_store_pick(&j, 0) == FK_STORE_GENERAL, "fp32 D += with gemm_bulk=0: general");
    j.n = 258;
    CHECK(fk_kg_store_pick(&j, 1) == FK_STORE_GENERAL, "fp32 D += with N 258: general");
    j = kg_job(FP8KIT_F32, 0.5f);
    CHECK(fk_kg_store_pick(&j, 1) == FK_STORE_GENERAL, "fp32 D = 0.5 D + ...: general");
    j = kg_job(FP8KIT_F32, 0.0f);
    CHECK(fk_kg_store_pick(&j, 1) == FK_STORE_GENERAL, "fp32 D = : general (no fp32 bulk copies)");
    j = kg_job(FP8KIT_BF16, 0.0f);
    CHECK(fk_kg_store_pick(&j, 1) == FK_STORE_BULK, "bf16 D = : bulk copies");
    CHECK(fk_kg_store_pick(&j, 0) == FK_STORE_GENERAL, "bf16 D = with gemm_bulk=0: general");
    j.ldd = 516;
    CHECK(fk_kg_store_pick(&j, 1) == FK_STORE_GENERAL, "bf16 D with row stride 516: general");
    j = kg_job(FP8KIT_F16, 1.0f);
    CHECK(fk_kg_store_pick(&j, 1) == FK_STORE_GENERAL, "f16 D += : general");
    j = kg_job(FP8KIT_F32, 1.0f);
    j.ktot = 0;
    CHECK(fk_kg_store_pick(&j, 1) == FK_STORE_GENERAL, "nothing to multiply (Ktot 0): general");
    j = kg_job(FP8KIT_F32, 1.0f);
    j.d = g_mem[0] + 4;
    CHECK(fk_kg_store_pick(&j, 1) == FK_STORE_GENERAL, "D 4-byte aligned: general");
    CHECK(fk_kg_store_fits(&j, FK_STORE_GENERAL) && !fk_kg_store_fits(&j, FK_STORE_TMA),
          "the general path always fits, the TMA store never");
}

static void families(void)
{
    CHECK((FK_STORES_SM90 & FK_STORE_BIT(FK_STORE_GENERAL)) && (FK_STORES_GROUPED & FK_STORE_BIT(FK_STORE_GENERAL)) &&
              (FK_STORES_SMALL & FK_STORE_BIT(FK_STORE_GENERAL)),
          "every family has the general path");
    CHECK(!(FK_STORES_SM90 & FK_STORE_BIT(FK_STORE_REDUCE)) && !(FK_STORES_GROUPED & FK_STORE_BIT(FK_STORE_REDUCE)),
          "the reduce-add path is the K-grouped family's alone");
    CHECK(FK_STORES_SMALL == FK_STORE_BIT(FK_STORE_GENERAL), "the small-M family: the general path only");
}

int main(void)
{
    d16_rules();
    reduce_rules();
    kg_rules();
    families();
    return fk_test_summary("test_store_rules");
}
