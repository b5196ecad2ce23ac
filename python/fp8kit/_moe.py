"""_moe.py - the mixture-of-experts layer of fp8kit.distributed on torch:
MoE (a torch.nn.Module: expert-parallel dispatch, the gate/up grouped GEMM
with the fused SwiGLU writing the 1x128-quantized input of the down
projection, the down grouped GEMM, combine), moe_reference (the same layer on
one device, every expert local, no communication: the oracle of the
multi-GPU checks) and quantize_experts (bf16 expert weights to fp8 with
128x128 block scales).

The quantization points, shared by both: the tokens quantized 1x128 (the
dispatch's fp8kit_quantize; pow2 as configured) before the gate/up GEMM;
the gate/up GEMM's y rounded to bf16 after SwiGLU and quantized 1x128
(fp8kit_grouped_gemm's out_quant, out_hp bf16); the down GEMM's output in
bf16; the top-k weighted sum of each token's expert rows in fp32 in top-k
order from +0, each product and sum rounded to fp32, rounded once to bf16
(docs/ep.md, "What a combine computes").

Imports torch (fp8kit.distributed needs it).
"""
from typing import Any, Dict, Optional, Tuple, Union

import torch

from ._arrays import torch_module
from ._common import cdiv
from ._context import Context
from ._ep import ExpertParallel
from ._grouped import grouped_mm
from ._lib import DType
from ._names import dtype_of_name
from ._nccl import EPGroup
from ._quant import quantize
from ._typing import DTypeLike
from .errors import InvalidArgumentError, InvalidShapeError, UnsupportedError

FN = "fp8kit.distributed.MoE"
FN_REF = "fp8kit.distributed.moe_reference"


def _fp8_dtype(dtype, what):
    dt = dtype_of_name(dtype, what)
    if dt not in (DType.E4M3, DType.E5M2):
        raise UnsupportedError("%s is %s; the layer's fp8 codes are e4m3 or e5m2" % (what, dt.name.lower()))
    return dt


def _name(dt):
    return dt.name.lower()


def quantize_experts(w13: torch.Tensor, w2: torch.Tensor, *, dtype: DTypeLike = "e4m3",
                     pow2: bool = False) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """The experts' weights in fp8 with 128x128 block scales (fp8kit.quantize, scheme "block128x128", each
    expert's matrix on its own): (w13_q, w13_scale, w2_q, w2_scale), on the weights' device.

    Arguments:
      w13: (E, 2I, H) float32 / float16 / bfloat16: each expert's gate rows (I) then its up rows (I), the
        layout vLLM calls gate_up_proj; scales (E, ceil(2I/128), ceil(H/128)).
      w2: (E, H, I): each expert's down projection; scales (E, ceil(H/128), ceil(I/128)).
      dtype: the codes, 'e4m3' (default) or 'e5m2'.
      pow2: power-of-two scales (DeepSeek's UE8M0 recipe)."""
    dt = _fp8_dtype(dtype, "quantize_experts: dtype")
    if w13.dim() != 3 or w2.dim() != 3:
        raise InvalidShapeError("quantize_experts: w13 must be (E, 2I, H) and w2 (E, H, I) (got %s and %s)"
                                % (tuple(w13.shape), tuple(w2.shape)))
    E, N2, H = (int(n) for n in w13.shape)
    if N2 % 2 or tuple(w2.shape) != (E, H, N2 // 2):
        raise InvalidShapeError("quantize_experts: w13 is %s, so w2 must be (E, H, I) = %s (got %s)"
                                % (tuple(w13.shape), (E, H, N2 // 2), tuple(w2.shape)))
    q13, s13 = quantize(w13, scheme="block128x128", dtype=dt, pow2=pow2)
    q2, s2 = quantize(w2, scheme="block128x128", dtype=dt, pow2=pow2)
    return q13, s13, q2, s2


def _combine(row_of, topk_weights, valid, T, H, device):
    """out[i] = bf16(acc), acc = fl32(acc + fl32(w[i, kk] * row_of(kk)[i])) over kk in top-k order where
    valid[i, kk], from +0 (separate torch multiply and add: each rounded to fp32, never fused)."""
    acc = torch.zeros((T, H), dtype=torch.float32, device=device)
    for kk in range(int(topk_weights.shape[1])):
        prod = topk_weights[:, kk:kk + 1] * row_of(kk).float()
        acc = torch.where(valid[:, kk:kk + 1], acc + prod, acc)
    return acc.to(torch.bfloat16)


def combine_reference(y_entries: torch.Tensor, topk_weights: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
    """The combine rule of docs/ep.md in torch: out[i] = bf16 of the fp32 sum, in top-k order from +0, of
    fl32(topk_weights[i, kk] * y_entries[i, kk]) over the entries with valid[i, kk] (each product and each
    sum rounded to fp32, no FMA; rounded once to bf16, RNE); +0 where none is valid. Returns (T, H) bf16.

    Arguments:
      y_entries: (T, top_k, H) bfloat16: the expert output row each top-k entry reads (anything where not
        valid).
      topk_weights: (T, top_k) float32.
      valid: (T, top_k) bool: the entries with an expert."""
    if y_entries.dim() != 3 or tuple(topk_weights.shape) != tuple(y_entries.shape[:2]) or \
            tuple(valid.shape) != tuple(y_entries.shape[:2]):
        raise InvalidShapeError("combine_reference: y_entries must be (T, top_k, H) and topk_weights and valid "
                                "(T, top_k) (got %s, %s, %s)" % (tuple(y_entries.shape), tuple(topk_weights.shape),
                                                                 tuple(valid.shape)))
    T, _, H = (int(n) for n in y_entries.shape)
    return _combine(lambda kk: y_entries[:, kk], topk_weights.float(), valid.bool(), T, H, y_entries.device)


def moe_reference(x: torch.Tensor, topk_ids: torch.Tensor, topk_weights: torch.Tensor, w13: torch.Tensor,
                  w13_scale: torch.Tensor, w2: torch.Tensor, w2_scale: torch.Tensor, *, dtype: DTypeLike = "e4m3",
                  pow2: bool = False, max_rows: Optional[int] = None, ctx: Optional[Context] = None,
                  return_intermediates: bool = False) -> Union[torch.Tensor, Tuple[torch.Tensor, Dict[str, Any]]]:
    """The MoE layer on one device without communication, every expert local: the oracle of MoE (the same
    quantization points, the same fp8kit calls on the same rows in the same order). CPU tensors run on the
    CPU backend, CUDA tensors on the GPU.

    Steps: x quantized 1x128 (fp8kit.quantize, `dtype`, pow2); each expert's rows - one per token that lists
    it among its top-k (once, however often it lists it), in token order - gathered into the masked layout
    (E, M, H); grouped_mm with activation="swiglu" and out_quant="block1x128" (y rounded to bf16, then
    quantized 1x128; out_pow2 = pow2); grouped_mm of the down projection to bf16; then each token's top-k
    entries summed as combine_reference does (ids outside [0, E) contribute nothing, like -1). Given the
    tokens of every rank in rank order, expert e's rows are in the order an expert-parallel dispatch
    delivers them.

    Arguments:
      x: (T, H) bfloat16 (float32 / float16 also) tokens.
      topk_ids: (T, top_k) integer global expert ids, -1 = none.
      topk_weights: (T, top_k) float32 router weights.
      w13, w13_scale: every expert's gate/up weights (E, 2I, H) in fp8 and their 128x128 scales
        (E, ceil(2I/128), ceil(H/128)) float32 (quantize_experts).
      w2, w2_scale: every expert's down weights (E, H, I) and scales (E, ceil(H/128), ceil(I/128)).
      dtype: the activations' fp8 codes, 'e4m3' or 'e5m2'.
      pow2: power-of-two 1x128 scales for the tokens and the down projection's input.
      max_rows: M, the rows per expert of the masked layout (default: the largest count, at least 1); pass
        the expert-parallel layer's M (recv.max_rows) to give the GEMMs the shapes that layer gives them.
      ctx: the fp8kit Context to run on (default: the cached one of x's device).
      return_intermediates: also return a dict: q, q_scale (x quantized), counts (E,) int32, rows (T, E)
        int64 (token i's row in expert e's slab; -1 where it is not there), a, a_scale (the masked A),
        h, h_scale (the SwiGLU output's codes and 1x128 scales, (E, M, I) and (E, M, ceil(I/128))),
        y ((E, M, H) bf16); rows of an expert past its count are unspecified.

    Returns (T, H) bfloat16 (and the dict)."""
    fp8 = _fp8_dtype(dtype, FN_REF + ": dtype")
    if x.dim() != 2 or topk_ids.dim() != 2 or tuple(topk_weights.shape) != tuple(topk_ids.shape) or \
            topk_ids.shape[0] != x.shape[0]:
        raise InvalidShapeError("%s: x must be (T, H) and topk_ids, topk_weights (T, top_k) (got %s, %s, %s)"
                                % (FN_REF, tuple(x.shape), tuple(topk_ids.shape), tuple(topk_weights.shape)))
    if w13.dim() != 3 or w2.dim() != 3:
        raise InvalidShapeError("%s: w13 must be (E, 2I, H) and w2 (E, H, I)" % FN_REF)
    T, H = (int(n) for n in x.shape)
    E, N2 = int(w13.shape[0]), int(w13.shape[1])
    I = N2 // 2
    if N2 % 2 or int(w13.shape[2]) != H or tuple(w2.shape) != (E, H, I):
        raise InvalidShapeError("%s: x is (T, %d), so w13 must be (E, 2I, %d) and w2 (E, %d, I) (got %s and %s)"
                                % (FN_REF, H, H, H, tuple(w13.shape), tuple(w2.shape)))
    dev = x.device
    for name, t in (("topk_ids", topk_ids), ("topk_weights", topk_weights), ("w13", w13), ("w13_scale", w13_scale),
                    ("w2", w2), ("w2_scale", w2_scale)):
        if t.device != dev:
            raise UnsupportedError("%s: %s is on %s, x on %s" % (FN_REF, name, t.device, dev))
    ids = topk_ids.long()
    valid = (ids >= 0) & (ids < E)
    inter: Dict[str, Any] = {}
    if T == 0:
        out = torch.zeros((0, H), dtype=torch.bfloat16, device=dev)
        return (out, inter) if return_intermediates else out
    q, s = quantize(x, scheme="block1x128", dtype=fp8, pow2=pow2, ctx=ctx)
    # which experts each token visits (once per expert), and its row in each expert's slab
    e_safe = torch.where(valid, ids, torch.zeros_like(ids))
    member = torch.zeros((T, E), dtype=torch.int32, device=dev)
    member.scatter_add_(1, e_safe, valid.to(torch.int32))
    member = member > 0
    counts = member.sum(0)
    rows = torch.where(member, torch.cumsum(member.to(torch.int64), 0) - 1, torch.full_like(counts, -1))
    most = int(counts.max())
    M = max(1, most) if max_rows is None else int(max_rows)
    if M < max(1, most):
        raise InvalidArgumentError("%s: max_rows = %d but an expert has %d rows" % (FN_REF, M, most))
    ti, ei = member.nonzero(as_tuple=True)
    ri = rows[ti, ei]
    kb = cdiv(H, 128)
    a = torch.zeros((E, M, H), dtype=torch.uint8, device=dev)
    a[ei, ri] = q.view(torch.uint8)[ti]
    a_scale = torch.ones((E, M, kb), dtype=torch.float32, device=dev)
    a_scale[ei, ri] = s[ti]
    a = a.view(torch_module().torch_dtype(fp8))
    counts32 = counts.to(torch.int32)
    h, h_scale = grouped_mm(a, w13.transpose(-2, -1), counts32, a_scale, w13_scale, layout="masked",
                            activation="swiglu", out_quant="block1x128", out_dtype=fp8, out_pow2=pow2,
                            scale_layout="plain", ctx=ctx)
    y = grouped_mm(h, w2.transpose(-2, -1), counts32, h_scale, w2_scale, out_dtype="bfloat16", layout="masked",
                   ctx=ctx)
    w = topk_weights.float()
    tok = torch.arange(T, device=dev)

    def row_of(kk):
        e = e_safe[:, kk]
        return y[e, rows[tok, e].clamp(min=0)]

    out = _combine(row_of, w, valid, T, H, dev)
    if return_intermediates:
        inter.update(q=q, q_scale=s, counts=counts32, rows=rows, a=a, a_scale=a_scale, h=h, h_scale=h_scale, y=y)
        return out, inter
    return out


class MoE(torch.nn.Module):
    """A mixture-of-experts layer over GPUs (expert parallelism): each rank holds E / W experts (rank r the
    global experts r*E/W ..), and forward runs

        fp8kit_ep_dispatch   x (T, H) bf16 -> fp8 1x128 tokens in the masked layout (E_local, M, H)
        fp8kit.grouped_mm    gate/up, activation="swiglu", out_quant="block1x128": fp8 h (E_local, M, I)
        fp8kit.grouped_mm    down projection -> bf16 (E_local, M, H)
        fp8kit_ep_combine    -> (T, H) bf16, each token's top-k rows weighted in fp32 in top-k order

    on torch's current stream, with no host synchronization (CUDA-graph capturable after a first call).
    moe_reference computes the same layer on one device. Inference only (fp8 weights, no autograd).

    Collective: construction and forward are called by every rank of the group in the same order (T may
    differ between ranks, 0 included). Construction allocates the expert-parallel buffers
    (ep.buffer_bytes: sized by max_tokens) and zero weights; fill them with load_weights, or build the layer
    with from_bf16.

    Arguments:
      group: an EPGroup (shared by the layers of a model: one NCCL communicator), or a torch.distributed
        process group / None (the default group): the layer then makes its own EPGroup on torch's current
        CUDA device and closes it in close().
      num_experts: E, a multiple of the world size.
      hidden: H, a multiple of 128.
      intermediate: I, each expert's MLP width, a multiple of 128 (the GPU's fused SwiGLU with block scales
        needs it).
      top_k: experts per token (1 .. min(E, 64)).
      max_tokens: the most tokens a rank passes to one forward.
      dtype: the activations' and weights' fp8 codes, 'e4m3' (default) or 'e5m2'.
      pow2: power-of-two 1x128 scales for the tokens and for h (DeepSeek's UE8M0 recipe; from_bf16 also
        quantizes the weights with it).
      scale_layout: the received tokens' scales, 'mn_major' (default: the grouped GEMM's fast layout on
        Hopper) or 'plain'.
      transport: 'nccl' (default: fp8kit's exchange on NCCL point-to-point) or 'nccl_ep' (NCCL EP's kernels;
        ExpertParallel says what it needs).
      mode: 'low_latency' (default: the masked layout) or 'high_throughput' (the contiguous layout).

    Parameters (requires_grad False): w13 (E_local, 2I, H) fp8 and w13_scale (E_local, ceil(2I/128),
    ceil(H/128)) float32; w2 (E_local, H, I) and w2_scale (E_local, ceil(H/128), ceil(I/128))."""

    def __init__(self, group: Any, num_experts: int, hidden: int, intermediate: int, top_k: int, max_tokens: int,
                 *, dtype: DTypeLike = "e4m3", pow2: bool = False, scale_layout: str = "mn_major",
                 transport: str = "nccl", mode: str = "low_latency") -> None:
        super().__init__()
        fp8 = _fp8_dtype(dtype, FN + ": dtype")
        if isinstance(intermediate, bool) or not isinstance(intermediate, int) or intermediate < 128 or \
                intermediate % 128:
            raise InvalidShapeError("%s: intermediate = %r; it must be a positive multiple of 128 (the fused "
                                    "SwiGLU with 128x128 weight scales starts the up rows on a scale block)"
                                    % (FN, intermediate))
        own = not isinstance(group, EPGroup)
        self._group = EPGroup(group) if own else group
        self._made_group = own
        try:
            self.ep = ExpertParallel(self._group, num_experts, hidden, top_k, max_tokens, dtype=fp8, pow2=pow2,
                                     scale_layout=scale_layout, transport=transport, mode=mode)
        except Exception:
            if own:
                self._group.close()
            raise
        self.num_experts, self.hidden, self.intermediate = int(num_experts), int(hidden), int(intermediate)
        self.top_k, self.max_tokens = int(top_k), int(max_tokens)
        self.dtype, self.pow2, self.scale_layout = _name(fp8), bool(pow2), self.ep.recv.scale_layout
        self.local_experts = self.ep.recv.local_experts
        self.first_expert = self.ep.recv.first_expert
        El, I, H = self.local_experts, self.intermediate, self.hidden
        dev = torch.device("cuda", self.ep.device)
        tfp8 = torch_module().torch_dtype(fp8)

        def codes(shape):
            return torch.nn.Parameter(torch.zeros(shape, dtype=torch.uint8, device=dev).view(tfp8),
                                      requires_grad=False)

        def scales(shape):
            return torch.nn.Parameter(torch.ones(shape, dtype=torch.float32, device=dev), requires_grad=False)

        self.w13 = codes((El, 2 * I, H))
        self.w13_scale = scales((El, cdiv(2 * I, 128), cdiv(H, 128)))
        self.w2 = codes((El, H, I))
        self.w2_scale = scales((El, cdiv(H, 128), cdiv(I, 128)))

    @classmethod
    def from_bf16(cls, group: Any, w13: torch.Tensor, w2: torch.Tensor, top_k: int, max_tokens: int, *,
                  num_experts: Optional[int] = None, dtype: DTypeLike = "e4m3", pow2: bool = False,
                  scale_layout: str = "mn_major", transport: str = "nccl",
                  mode: str = "low_latency") -> "MoE":
        """A MoE whose weights are bf16 (or f16 / f32) ones quantized with quantize_experts (128x128 block
        scales). Collective, as the constructor.

        Arguments:
          group: as the constructor's.
          w13: (E_w, 2I, H) gate/up weights: this rank's E_local experts, or every expert (E_w = num_experts:
            this rank's E/W are taken).
          w2: (E_w, H, I) down weights, the same experts.
          top_k, max_tokens, dtype, pow2, scale_layout, transport, mode: as the constructor's.
          num_experts: E (default: E_w times the world size, i.e. w13 and w2 hold this rank's experts)."""
        if isinstance(group, EPGroup):
            world, rank = group.world, group.rank
        else:
            dist = torch.distributed
            if not dist.is_available() or not dist.is_initialized():
                raise InvalidArgumentError("%s.from_bf16: torch.distributed is not initialized" % FN)
            world, rank = dist.get_world_size(group), dist.get_rank(group)
        if w13.dim() != 3 or w2.dim() != 3:
            raise InvalidShapeError("%s.from_bf16: w13 must be (E, 2I, H) and w2 (E, H, I)" % FN)
        Ew = int(w13.shape[0])
        E = Ew * world if num_experts is None else int(num_experts)
        if Ew == E and world > 1:
            if E % world:
                raise InvalidArgumentError("%s.from_bf16: num_experts = %d is not a multiple of the world size %d"
                                           % (FN, E, world))
            el = E // world
            w13, w2 = w13[rank * el:(rank + 1) * el], w2[rank * el:(rank + 1) * el]
        elif Ew * world != E:
            raise InvalidShapeError("%s.from_bf16: w13 holds %d experts; expected this rank's %s or all %d"
                                    % (FN, Ew, "%d" % (E // world) if E % world == 0 else "E / W", E))
        q13, s13, q2, s2 = quantize_experts(w13, w2, dtype=dtype, pow2=pow2)
        m = cls(group, E, int(w13.shape[2]), int(w13.shape[1]) // 2, top_k, max_tokens, dtype=dtype, pow2=pow2,
                scale_layout=scale_layout, transport=transport, mode=mode)
        m.load_weights(q13, s13, q2, s2)
        return m

    def load_weights(self, w13: torch.Tensor, w13_scale: torch.Tensor, w2: torch.Tensor,
                     w2_scale: torch.Tensor) -> None:
        """Copies this rank's experts' fp8 weights and 128x128 scales into the parameters (any device; the
        shapes and dtypes of the parameters, as quantize_experts gives them).

        Arguments:
          w13, w13_scale: (E_local, 2I, H) fp8 codes of the layer's dtype, (E_local, ceil(2I/128),
            ceil(H/128)) float32.
          w2, w2_scale: (E_local, H, I) and (E_local, ceil(H/128), ceil(I/128))."""
        with torch.no_grad():
            for name, src in (("w13", w13), ("w13_scale", w13_scale), ("w2", w2), ("w2_scale", w2_scale)):
                dst = getattr(self, name)
                if tuple(src.shape) != tuple(dst.shape) or src.dtype != dst.dtype:
                    raise InvalidShapeError("%s.load_weights: %s must be %s %s (got %s %s)"
                                            % (FN, name, tuple(dst.shape), dst.dtype, tuple(src.shape), src.dtype))
                if src.element_size() == 1:  # fp8: copied as bytes
                    dst.view(torch.uint8).copy_(src.view(torch.uint8))
                else:
                    dst.copy_(src)

    def forward(self, x: torch.Tensor, topk_ids: torch.Tensor, topk_weights: torch.Tensor,
                return_intermediates: bool = False) -> Union[torch.Tensor, Tuple[torch.Tensor, Dict[str, Any]]]:
        """The layer on this rank's tokens (collective). Returns (T, H) bfloat16: for each token the sum over
        its top-k experts of weight x expert(token), as docs/ep.md's combine computes it.

        Arguments:
          x: (T, H) bfloat16 (float16 / float32 also) tokens on the layer's device, 0 <= T <= max_tokens.
          topk_ids: (T, top_k) global expert ids on the device (int32; other integer dtypes are converted),
            -1 = none; ids outside [-1, E) are dropped (the layer's ep.recv.status says so).
          topk_weights: (T, top_k) router weights on the device (float32; other float dtypes are converted).
          return_intermediates: also return a dict: recv (the Received views: valid until the next forward),
            h, h_scale (the down projection's fp8 input and its 1x128 scales), y (the experts' bf16 outputs)."""
        if topk_ids.dtype != torch.int32 or not topk_ids.is_contiguous():
            topk_ids = topk_ids.to(torch.int32).contiguous()
        if topk_weights.dtype != torch.float32 or not topk_weights.is_contiguous():
            topk_weights = topk_weights.to(torch.float32).contiguous()
        ep = self.ep
        recv = ep.dispatch(x, topk_ids, topk_weights)
        h, h_scale = grouped_mm(recv.x, self.w13.transpose(-2, -1), recv.offsets, recv.scale, self.w13_scale,
                                layout=recv.layout, activation="swiglu", out_quant="block1x128", out_dtype=self.dtype,
                                out_pow2=self.pow2, scale_layout=self.scale_layout, ctx=ep.ctx)
        y = grouped_mm(h, self.w2.transpose(-2, -1), recv.offsets, h_scale, self.w2_scale, out_dtype="bfloat16",
                       layout=recv.layout, ctx=ep.ctx)
        out = ep.combine(y)
        if return_intermediates:
            return out, {"recv": recv, "h": h, "h_scale": h_scale, "y": y}
        return out

    def close(self) -> None:
        """Frees the expert-parallel buffers now (tensors of ep.recv must not be used afterwards) and closes
        the EPGroup when the layer made it itself. Idempotent."""
        self.ep.close()
        if self._made_group:
            self._group.close()

    def extra_repr(self) -> str:
        """The layer's shape in torch's module printout."""
        return ("experts=%d (local %d from %d), hidden=%d, intermediate=%d, top_k=%d, max_tokens=%d, dtype=%s, "
                "pow2=%s, scale_layout=%s, transport=%s, rank %d of %d" % (
                    self.num_experts, self.local_experts, self.first_expert, self.hidden, self.intermediate,
                    self.top_k, self.max_tokens, self.dtype, self.pow2, self.scale_layout, self.ep.recv.transport,
                    self.ep.group.rank, self.ep.group.world))
