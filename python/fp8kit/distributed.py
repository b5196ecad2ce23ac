"""fp8kit.distributed - expert parallelism (EP) for mixture-of-experts layers
across GPUs, over torch.distributed: the Python side of include/fp8kit_ep.h
(docs/ep.md; docs/python.md, "Expert parallelism").

    import torch, torch.distributed as dist
    from fp8kit.distributed import EPGroup, MoE
    dist.init_process_group("nccl")                      # under torchrun
    torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
    group = EPGroup()                                    # fp8kit's own NCCL communicator over the group
    moe = MoE.from_bf16(group, w13, w2, top_k=8, max_tokens=128)   # this rank's experts, fp8 128x128
    out = moe(x, topk_ids, topk_weights)                 # (T, H) bf16, on torch's current stream

- EPGroup: an NCCL communicator made from a torch.distributed process group
  (rank 0's ncclGetUniqueId broadcast with broadcast_object_list, then
  ncclCommInitRank on every rank), on the libnccl.so.2 the library loads.
- ExpertParallel: one fp8kit_ep (dispatch / combine; Received: the masked
  layout's views as torch tensors aliasing the layer's buffers); ep_config,
  ep_buffer_size, EpConfig / EpRecv (the ctypes structs).
- MoE: the drop-in torch.nn.Module (dispatch, gate/up grouped GEMM with the
  fused SwiGLU writing the down projection's fp8 input, down grouped GEMM,
  combine); quantize_experts; moe_reference (the same layer on one device,
  no communication) and combine_reference (the combine rule in torch).

Needs torch; the layer itself needs a CUDA build of libfp8kit with NCCL
(fp8kit_ep_create says "built without NCCL" otherwise) and a GPU per rank.
"""
from ._ep import (MAX_TOP_K, EpConfig, EpRecv, ExpertParallel, Received, alias_tensor, ep_buffer_size, ep_config)
from ._moe import MoE, combine_reference, moe_reference, quantize_experts
from ._nccl import EPGroup, nccl_library, nccl_version

__all__ = ["EPGroup", "ExpertParallel", "Received", "MoE", "moe_reference", "combine_reference",
           "quantize_experts", "ep_config", "ep_buffer_size", "EpConfig", "EpRecv", "MAX_TOP_K", "alias_tensor",
           "nccl_library", "nccl_version"]
