"""_hooks.py - how modules learn that torch tensors were first seen (that
fp8kit._torch was imported) without the modules below them importing them:
on_torch(hook) registers a hook, and _torch.py calls torch_loaded(itself) as
the last step of its import, so the hooks run once, as part of that import
(also where torch.compile traces the first call that meets a torch tensor:
an import runs for real there, while a plain call would be traced).
"""
import threading
from typing import Any, Callable, List

_hooks: List[Callable[[Any], None]] = []
_loaded: Any = None
_lock = threading.Lock()


def on_torch(hook: Callable[[Any], None]) -> None:
    """Calls hook(fp8kit._torch) once _torch.py is imported (at once if it has been)."""
    with _lock:
        _hooks.append(hook)
        loaded = _loaded
    if loaded is not None:
        hook(loaded)


def torch_loaded(module: Any) -> None:
    """Runs every hook with `module` (fp8kit._torch); called by it, once."""
    global _loaded
    with _lock:
        _loaded = module
        hooks = list(_hooks)
    for hook in hooks:
        hook(module)
