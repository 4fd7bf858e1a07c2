"""The HuggingFace hub, optional (``pip install 'specbound[hub]'``): snapshots and reachability.

``huggingface_hub`` is imported only when a hub id is opened (:func:`snapshot`) or a named grid
of hub checkpoints is expanded (:func:`available`); it honours ``HF_HUB_OFFLINE`` and its
local cache. Every failure is a :class:`~numerics.errors.CheckpointError` naming the
repository (or grid) with one line of advice.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from numerics.errors import CheckpointError

__all__ = ["snapshot", "available"]

_NO_HUB = "the HuggingFace hub is not reachable from here"
_INSTEAD = "pass local folders or registry names (minilm-l6, minilm-l3)"


def snapshot(repo_id: str, revision: str | None) -> Path:
    """The local folder of hub repository ``repo_id`` at ``revision``, with its JSON and safetensors files.

    Raises:
      CheckpointError: ``huggingface_hub`` is not installed, or the download failed.
    """
    try:
        from huggingface_hub import snapshot_download  # optional: huggingface_hub
    except ImportError:
        raise CheckpointError(
            repo_id,
            "is not a local path, and fetching it from the HuggingFace Hub needs huggingface_hub "
            "(pip install 'specbound[hub]')",
        ) from None
    try:
        folder = snapshot_download(repo_id=repo_id, revision=revision, allow_patterns=["*.json", "*.safetensors"])
    except Exception as exc:  # the hub raises many types (HTTP, offline, not found, OSError)
        first = next((line for line in str(exc).splitlines() if line.strip()), "")
        raise CheckpointError(
            repo_id, f"could not be fetched from the HuggingFace Hub: {type(exc).__name__}: {first}"
        ) from exc
    return Path(folder)


def _env_true(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in {"1", "true", "yes", "on"}


def _cached(hub: Any, repo_id: str) -> bool:
    """Whether ``repo_id``'s ``config.json`` is in the local HuggingFace cache."""
    try:
        found = hub.try_to_load_from_cache(repo_id, "config.json")
    except Exception:  # an old huggingface_hub, an unreadable cache
        return False
    return isinstance(found, (str, os.PathLike))


def available(ids: Sequence[str], *, label: str, offline_ok: bool = True, timeout: float = 3.0) -> tuple[str, ...]:
    """The repositories of ``ids`` that can be fetched from here.

    Args:
      ids: hub repository ids.
      label: what they are (a grid's name), for error messages.
      offline_ok: with ``HF_HUB_OFFLINE=1``, or when the hub does not answer, return the ones
        already in the local HuggingFace cache (possibly a subset) instead of failing.
      timeout: seconds to wait for the hub (one metadata request, for ``ids[0]``).

    Returns:
      ``ids``, all of them when the hub answers; the cached ones when offline and ``offline_ok``.

    Raises:
      CheckpointError: ``huggingface_hub`` is not installed, or the hub is not reachable (and,
        if ``offline_ok``, nothing is cached), naming ``label``.
    """
    ids = tuple(ids)
    try:
        import huggingface_hub  # optional: huggingface_hub
    except ImportError:
        raise CheckpointError(
            label, f"{_NO_HUB} (huggingface_hub is not installed: pip install 'specbound[hub]'); {_INSTEAD}"
        ) from None

    def cached_or_fail(why: str) -> tuple[str, ...]:
        if offline_ok:
            cached = tuple(r for r in ids if _cached(huggingface_hub, r))
            if cached:
                return cached
            why += f" and none of the {len(ids)} repositories is in the local cache"
        raise CheckpointError(label, f"{_NO_HUB} ({why}); {_INSTEAD}")

    if _env_true("HF_HUB_OFFLINE"):
        return cached_or_fail("HF_HUB_OFFLINE=1")
    try:
        huggingface_hub.model_info(ids[0], timeout=timeout)
    except Exception as exc:  # offline, DNS, proxy, HTTP errors: all mean "not from here"
        first = next((line for line in str(exc).splitlines() if line.strip()), "")
        return cached_or_fail(f"{type(exc).__name__}: {first}" if first else type(exc).__name__)
    return ids
