/* trace_small.cu - where a small-M GEMM call's time goes (an experiment, not
 * a test or a benchmark of record): runs fp8kit_gemm (tensor scales, e4m3 ->
 * bf16) between two one-thread "stamp" kernels that read %globaltimer, with
 * the L2 flushed before (TRACE_NOFLUSH=1: not), the same for cuBLASLt and for
 * nothing, and prints the medians: stamp to stamp for each, and from the
 * small-M kernel's own per-CTA stamps (library built with -DFK_SMALL_TRACE,
 * see src/cuda/gemm/sm90/small.cu) the median time from a CTA's entry to each phase.
 * Build and run on the device: bash bench/profile/trace_small.sh M N K [M N K ...] */
#include <cuda_runtime.h>
#include <cublasLt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <algorithm>
#include <vector>
#include "fp8kit.h"
extern "C" int fk_small_trace_get(unsigned long long *dst, int ctas);
__global__ void stamp(unsigned long long *p) { unsigned long long t; asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); *p = t; }
#define CK(x) do { cudaError_t e_ = (x); if (e_) { printf("%s: %s\n", #x, cudaGetErrorString(e_)); exit(1);} } while (0)
static double med(std::vector<double> v) { std::sort(v.begin(), v.end()); return v[v.size()/2]; }
int main(int argc, char **argv) {
  int M = atoi(argv[1]), N = atoi(argv[2]), K = atoi(argv[3]);
  cudaStream_t s; CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  fp8kit_ctx *ctx; fp8kit_ctx_create(FP8KIT_BACKEND_CUDA, 0, &ctx);
  unsigned char *A, *B; void *D; float *sc; unsigned long long *ts; void *flush; size_t fb = 256u << 20;
  CK(cudaMalloc(&A, (size_t)M * K)); CK(cudaMalloc(&B, (size_t)N * K)); CK(cudaMalloc(&D, (size_t)M * N * 2));
  CK(cudaMalloc(&sc, 64)); CK(cudaMalloc(&ts, 64)); CK(cudaMalloc(&flush, fb));
  CK(cudaMemset(A, 0x30, (size_t)M * K)); CK(cudaMemset(B, 0x30, (size_t)N * K));
  float one[8] = {1, 1, 1, 1, 1, 1, 1, 1}; CK(cudaMemcpy(sc, one, 32, cudaMemcpyHostToDevice));
  fp8kit_gemm_desc d; memset(&d, 0, sizeof d); d.scale_a = d.scale_b = FP8KIT_SCALE_TENSOR;
  fp8kit_gemm_args a; memset(&a, 0, sizeof a);
  a.a = fp8kit_tensor_2d(A, FP8KIT_E4M3, M, K, K); a.b = fp8kit_tensor_2d(B, FP8KIT_E4M3, N, K, K);
  int64_t one64 = 1; a.scale_a = fp8kit_tensor_make(sc, FP8KIT_F32, 1, &one64); a.scale_b = fp8kit_tensor_make(sc + 4, FP8KIT_F32, 1, &one64);
  a.alpha = 1; a.d = fp8kit_tensor_2d(D, FP8KIT_BF16, M, N, N);
  // cuBLASLt: D^T(N,M) = B(N,K) . A^T : column-major view: D col-major M x N = A(KxM)^T * B(KxN)
  cublasLtHandle_t h; cublasLtCreate(&h); cublasLtMatmulDesc_t op; cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F);
  cublasOperation_t T = CUBLAS_OP_T, Nn = CUBLAS_OP_N;
  cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &T, sizeof T); cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &Nn, sizeof Nn);
  float *sa = sc, *sb = sc + 4;
  cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &sa, sizeof sa); cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &sb, sizeof sb);
  cublasLtMatrixLayout_t la, lb, lc;
  cublasLtMatrixLayoutCreate(&la, CUDA_R_8F_E4M3, K, M, K); cublasLtMatrixLayoutCreate(&lb, CUDA_R_8F_E4M3, K, N, K); cublasLtMatrixLayoutCreate(&lc, CUDA_R_16BF, M, N, M);
  cublasLtMatmulPreference_t pref; cublasLtMatmulPreferenceCreate(&pref); size_t ws = 32u << 20; void *wsp; CK(cudaMalloc(&wsp, ws));
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws);
  cublasLtMatmulHeuristicResult_t hr; int nr = 0;
  cublasLtMatmulAlgoGetHeuristic(h, op, la, lb, lc, lc, pref, 1, &hr, &nr);
  float alpha = 1, beta = 0;
  auto lt = [&]() { int e_ = cublasLtMatmul(h, op, &alpha, A, la, B, lb, &beta, D, lc, D, lc, &hr.algo, wsp, ws, s); if (e_) { printf("lt fail %d nr %d\n", e_, nr); exit(1);} };
  auto ours = [&]() { fp8kit_status st = fp8kit_gemm(ctx, &d, &a, s); if (st) { printf("ours fail %s\n", fp8kit_last_error(ctx)); exit(1);} };
  for (int i = 0; i < 5; i++) { ours(); lt(); }
  CK(cudaStreamSynchronize(s));
  std::vector<double> e0, gapin, gapout, tot, lt_tot, none_tot, ph[12], spread;
  static unsigned long long tr[1024][12];
  int grid = 0;
  for (int it = 0; it < 41; it++) {
    for (int w = 0; w < 3; w++) {
      if (!getenv("TRACE_NOFLUSH")) CK(cudaMemsetAsync(flush, it, fb, s));
      stamp<<<1, 1, 0, s>>>(ts);
      if (w == 0) ours(); else if (w == 1) lt();
      stamp<<<1, 1, 0, s>>>(ts + 1);
      unsigned long long t[2]; CK(cudaMemcpyAsync(t, ts, 16, cudaMemcpyDeviceToHost, s)); CK(cudaStreamSynchronize(s));
      double tt = (t[1] - t[0]) * 1e-3;
      if (w == 0) {
        tot.push_back(tt);
        memset(tr, 0, sizeof tr); fk_small_trace_get(&tr[0][0], 1024);
        unsigned long long mn0 = ~0ull, mx0 = 0, mx8 = 0; int g = 0;
        for (int c = 0; c < 1024; c++) if (tr[c][0] > t[0] && tr[c][0] < t[1]) { g++; mn0 = std::min(mn0, tr[c][0]); mx0 = std::max(mx0, tr[c][0]); mx8 = std::max(mx8, tr[c][8]); }
        grid = g;
        gapin.push_back((mn0 - t[0]) * 1e-3); gapout.push_back((t[1] - mx8) * 1e-3); spread.push_back((mx0 - mn0) * 1e-3);
        for (int p = 1; p < 12; p++) { std::vector<double> v; for (int c = 0; c < 1024; c++) if (tr[c][0] > t[0] && tr[c][0] < t[1] && tr[c][p]) v.push_back((tr[c][p] - tr[c][0]) * 1e-3); if (!v.empty()) ph[p].push_back(med(v)); }
      } else if (w == 1) lt_tot.push_back(tt); else none_tot.push_back(tt);
    }
  }
  printf("%dx%dx%d ctas %d: stamp..stamp ours %.2f us, cublasLt %.2f, nothing %.2f\n", M, N, K, grid, med(tot), med(lt_tot), med(none_tot));
  printf("  ours: stamp->first CTA entry %.2f, CTA entry spread %.2f, last CTA end->stamp %.2f\n", med(gapin), med(spread), med(gapout));
  const char *nm[12] = {"", "init+sync", "prod dep_wait", "prod last TMA", "cons first full", "cons loop end", "tile sync", "epilogue end", "exit barrier", "epi scales ready", "epi first v", "epi first out4"};
  for (int p = 1; p < 12; p++) if (!ph[p].empty()) printf("  median CTA: entry->%s %.2f us\n", nm[p], med(ph[p]));
  return 0;
}
