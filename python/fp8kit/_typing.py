"""_typing.py - the type aliases of fp8kit's annotations (the package ships
py.typed). Arrays are numpy arrays (TaggedArray for fp8 / bf16 codes),
torch tensors or any object with __dlpack__: typed Any, as neither torch nor
a DLPack protocol type is a dependency."""
from typing import Any, Tuple, Union

from ._lib import DType

Array = Any  # numpy.ndarray / TaggedArray, torch.Tensor, or an object with __dlpack__
ArrayPair = Tuple[Any, Any]  # (q, scale) of quantize
DTypeLike = Union[str, DType, Any]  # 'bf16', 'float8_e4m3fn', ..., a DType, a numpy or torch dtype
Stream = Any  # an int cudaStream_t or an object with .cuda_stream (a torch stream); None: the default rule
