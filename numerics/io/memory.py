"""Tensors held in memory -> a :class:`~numerics.io.checkpoint.Checkpoint`: a live torch module, or a mapping of arrays.

So that a training loop can call :func:`numerics.analysis.analyze` on its model without saving
it. Two kinds of source, read through the same architecture maps as files
(:mod:`numerics.io.architectures`):

* a mapping ``{tensor name: array}`` (numpy arrays or torch tensors), with the configuration
  given as ``config=`` (``config.json``'s keys) or just ``heads=``;
* a ``torch.nn.Module`` (a ``transformers`` model, a ``torch.nn.TransformerEncoder``, the study's
  encoder): its ``state_dict()``; the configuration is ``module.config`` (a ``transformers``
  ``PretrainedConfig``, or a mapping of ``config.json`` keys), else the head count its
  ``torch.nn.MultiheadAttention`` layers share, and ``heads=`` overrides either.

torch is imported only when a torch object is passed. Each tensor keeps its dtype tag (``F32``,
``BF16``, ...), so its rank tolerance is the one its file would get, and is widened exactly to
float64 when read (:class:`ArrayTensors`, the in-memory :class:`~numerics.io.checkpoint.TensorStore`):
the same model saved and in memory give the same analysis. The arrays share the live tensors'
memory (no copy on the CPU): the model must not change while it is analysed. No worker process
can read them, so their whole-matrix SVDs run in this process.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any

import numpy as np

from numerics.errors import CheckpointError
from numerics.io.checkpoint import Checkpoint, checkpoint_from_store
from numerics.io.safetensors_reader import TensorInfo, require_finite

__all__ = ["ArrayTensors", "is_in_memory", "open_in_memory"]

#: numpy dtype -> safetensors dtype tag (the tag a saved copy of the array would carry).
_NUMPY_TAGS: Mapping[np.dtype, str] = MappingProxyType(
    {
        np.dtype(np.float64): "F64",
        np.dtype(np.float32): "F32",
        np.dtype(np.float16): "F16",
        np.dtype(np.int64): "I64",
        np.dtype(np.int32): "I32",
        np.dtype(np.int16): "I16",
        np.dtype(np.int8): "I8",
        np.dtype(np.uint8): "U8",
        np.dtype(np.bool_): "BOOL",
    }
)


class ArrayTensors:
    """A :class:`~numerics.io.checkpoint.TensorStore` over arrays in memory.

    Args:
      arrays: ``{name: array}`` in their stored precision (bfloat16 already widened to float32, exactly).
      tags: ``{name: dtype tag}`` (``F32``, ``BF16``, ...), as a safetensors header would say.
      label: what errors name instead of a file, e.g. ``"<in-memory BertModel>"``.
    """

    def __init__(self, arrays: Mapping[str, np.ndarray], tags: Mapping[str, str], label: str) -> None:
        self._arrays = MappingProxyType(dict(arrays))
        self._label = label
        self._infos = MappingProxyType(
            {
                name: TensorInfo(dtype=tags[name], shape=tuple(int(d) for d in a.shape), begin=0, end=int(a.nbytes))
                for name, a in self._arrays.items()
            }
        )

    @property
    def infos(self) -> Mapping[str, TensorInfo]:
        return self._infos

    def where(self, name: str) -> str:
        return self._label

    def file(self, name: str) -> Path | None:
        return None

    def read(self, name: str) -> np.ndarray:
        with np.errstate(invalid="ignore"):  # a signalling NaN is reported below, not warned about
            out = np.array(self._arrays[name], dtype=np.float64)
        require_finite(self._label, name, out)
        return out


# --------------------------------------------------------------------------- torch, without importing it


def _from_torch(value: Any) -> bool:
    """Whether ``value`` is a torch object (judged by its class's module: torch is not imported)."""
    return type(value).__module__.split(".")[0] == "torch"


def _is_torch_module(value: Any) -> bool:
    return any(c.__name__ == "Module" and c.__module__ == "torch.nn.modules.module" for c in type(value).__mro__)


def is_in_memory(source: Any) -> bool:
    """Whether :func:`open_in_memory` takes ``source``: a mapping (of names to arrays) or a ``torch.nn.Module``."""
    return isinstance(source, Mapping) or _is_torch_module(source)


def _torch_array(name: str, value: Any, label: str) -> tuple[np.ndarray, str]:
    import torch  # optional: torch (imported only because a torch object was passed)

    if not isinstance(value, torch.Tensor):
        raise CheckpointError(label, f"is a {type(value).__name__}, not a numpy array or torch tensor", tensor=name)
    if value.layout != torch.strided or value.device.type == "meta":
        raise CheckpointError(
            label, f"is a {value.layout} tensor on {value.device}: only dense tensors with values are read", tensor=name
        )
    tags = {
        torch.float64: "F64",
        torch.float32: "F32",
        torch.float16: "F16",
        torch.bfloat16: "BF16",
        torch.int64: "I64",
        torch.int32: "I32",
        torch.int16: "I16",
        torch.int8: "I8",
        torch.uint8: "U8",
        torch.bool: "BOOL",
    }
    tag = tags.get(value.dtype)
    if tag is None:
        raise CheckpointError(
            label, f"has dtype {value.dtype}, which is not read (float, integer or bool tensors are)", tensor=name
        )
    plain = value.detach().cpu()
    if plain.dtype == torch.bfloat16:  # numpy has no bfloat16; float32 holds every bfloat16 exactly
        plain = plain.float()
    return plain.resolve_conj().resolve_neg().numpy(), tag


def _array(name: Any, value: Any, label: str) -> tuple[np.ndarray, str]:
    if not isinstance(name, str):
        raise CheckpointError(label, f"has the key {name!r} ({type(name).__name__}): tensor names must be strings")
    if _from_torch(value):
        return _torch_array(name, value, label)
    if not isinstance(value, np.ndarray):
        raise CheckpointError(label, f"is a {type(value).__name__}, not a numpy array or torch tensor", tensor=name)
    tag = _NUMPY_TAGS.get(value.dtype.newbyteorder("="))
    if tag is None:
        raise CheckpointError(
            label, f"has dtype {value.dtype}, which is not read (float, integer or bool arrays are)", tensor=name
        )
    return value, tag


# --------------------------------------------------------------------------- opening


def _module_config(module: Any) -> dict[str, Any]:
    """``module.config`` as ``config.json`` keys; else the head count every ``MultiheadAttention`` shares."""
    config = getattr(module, "config", None)
    if config is not None and callable(getattr(config, "to_dict", None)):
        return dict(config.to_dict())
    if isinstance(config, Mapping):
        return dict(config)
    import torch  # optional: torch (a torch module was passed, so torch is already loaded)

    heads = {m.num_heads for m in module.modules() if isinstance(m, torch.nn.MultiheadAttention)}
    out: dict[str, Any] = {"num_heads": heads.pop()} if len(heads) == 1 else {}
    # A torch.nn.TransformerEncoder has no config: what its saved config.json would say (norm_first, activation, eps)
    # is read from its layers, when they all agree; the activation only when it is one torch names.
    layers = [m for m in module.modules() if isinstance(m, torch.nn.TransformerEncoderLayer)]
    if layers:
        firsts = {bool(m.norm_first) for m in layers}
        if len(firsts) == 1:
            out["norm_first"] = firsts.pop()
        eps = {float(n.eps) for m in layers for n in (m.norm1, m.norm2)}  # what --layernorm lipschitz reads
        if len(eps) == 1:
            out["layer_norm_eps"] = eps.pop()
        names = {_torch_activation(m.activation) for m in layers}
        if len(names) == 1 and None not in names:
            out["activation"] = names.pop()
    return out


def _torch_activation(fn: Any) -> str | None:
    """``"relu"`` or ``"gelu"`` for torch's own activations of an encoder layer (function or module), else ``None``."""
    import torch  # optional: torch (a torch module was passed, so torch is already loaded)

    if fn is torch.nn.functional.relu or isinstance(fn, torch.nn.ReLU):
        return "relu"
    if fn is torch.nn.functional.gelu or (isinstance(fn, torch.nn.GELU) and fn.approximate == "none"):
        return "gelu"
    return None


def open_in_memory(
    source: Any, *, heads: int | None = None, config: Mapping[str, Any] | None = None, architecture: str | None = None
) -> Checkpoint:
    """Open a ``torch.nn.Module`` or a mapping ``{tensor name: array}`` as a :class:`Checkpoint` (see the module doc).

    Args:
      source: the model, or its tensors by name (numpy arrays or torch tensors).
      heads: attention heads ``H``; overrides the configuration. Needed for a mapping without
        ``config`` (or whose ``config`` lacks it).
      config: ``config.json``'s keys for a mapping (a module's own ``config`` is used otherwise).
      architecture: force one map of :data:`numerics.io.architectures.ARCHITECTURES`.

    Returns:
      A :class:`Checkpoint` whose ``source`` is a label such as ``"<in-memory BertModel>"``,
      with no ``files``; nothing is converted until a layer is loaded.

    Raises:
      TypeError: ``source`` is neither a mapping nor a torch module.
      CheckpointError: a value is not an array, a dtype is not read, the names match no
        architecture, a matrix is missing or mis-shaped, the head count is unknown (the message
        names the label and the tensor).
    """
    if _is_torch_module(source):
        label = f"<in-memory {type(source).__name__}>"
        tensors: Mapping[Any, Any] = source.state_dict()
        if config is None:
            config = _module_config(source)
        config_where: str | None = f"{label}.config"
    elif isinstance(source, Mapping):
        label, tensors = "<in-memory tensors>", source
        config_where = f"{label} config" if config is not None else None
    else:
        raise TypeError(
            f"source={type(source).__name__} must be a torch.nn.Module or a mapping of tensor names to arrays"
        )
    if config is not None and not isinstance(config, Mapping):
        raise TypeError(f"config={type(config).__name__} must be a mapping of config.json keys")
    arrays, tags = {}, {}
    for name, value in tensors.items():
        arrays[name], tags[name] = _array(name, value, label)
    return checkpoint_from_store(
        ArrayTensors(arrays, tags, label),
        config=config or {},
        source=label,
        where=label,
        config_where=config_where if config else None,
        heads=heads,
        architecture=architecture,
        config_name="config",
    )
