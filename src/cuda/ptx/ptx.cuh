/* ptx/ptx.cuh - the umbrella: every inline-PTX wrapper of the project (one function per instruction). */
#ifndef FK_CUDA_PTX_PTX_CUH
#define FK_CUDA_PTX_PTX_CUH

#include "cuda/ptx/common.cuh"   /* FK_SM90_DEVICE, FK_DEV, fk_smem_addr */
#include "cuda/ptx/cluster.cuh"  /* mapa, ld.shared::cluster, barrier.cluster */
#include "cuda/ptx/compiler.cuh" /* empty statements: register fences, keeping values live */
#include "cuda/ptx/cvt.cuh"      /* cvt: bf16x2, f16x2, fp8x2, fp8x2 <-> f16x2, f16 -> f32; f16x2 mul */
#include "cuda/ptx/math.cuh"     /* rcp / ex2 estimates, prmt, opaque mov / add */
#include "cuda/ptx/mbarrier.cuh" /* mbarrier */
#include "cuda/ptx/mem.cuh"      /* st.shared, release / acquire, cp.async */
#include "cuda/ptx/sreg.cuh"     /* %cluster_ctarank, %globaltimer */
#include "cuda/ptx/sync.cuh"     /* griddepcontrol, bar.sync / bar.arrive, setmaxnreg */
#include "cuda/ptx/tma.cuh"      /* cp.async.bulk (tensor), prefetch.tensormap, createpolicy, fence.proxy.async */
#include "cuda/ptx/wgmma.cuh"    /* wgmma */

#endif
