"""``belieflens info``: provenance, dimensions and sizes of a cache file; its rerun command."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

from belieflens.errors import CacheFileError
from belieflens.store.file import open_cache
from belieflens.store.integrity import coverage


def describe(path: str | Path) -> str:
    """A human-readable summary of a cache file (raises CacheFileError if unreadable).

    Says which variables carry per-chunk checksums (``checksums: none`` for files written
    before them); reads only the small variables, so a damaged chunk of ``resid`` is found
    by ``info --verify``, not here. ``belieflens.info`` is this function.

    Args:
        path: a cache file.

    Returns:
        Lines of text: the file and its size, its checksums, its provenance (environment,
        parameters, model, versions), its dimensions and variables.

    Examples:
        >>> summary = belieflens.info("study.h5")
        >>> summary.splitlines()[0]
        'file: study.h5 (...)'
        >>> "env_name: coin-flip" in summary
        True
    """
    p = Path(path)
    ds = open_cache(p)
    try:
        lines = [f"file: {p} ({p.stat().st_size / 1e6:.1f} MB)",
                 f"checksums: {coverage(p).text()}", "provenance:"]
        for k in sorted(ds.attrs):
            lines.append(f"  {k}: {ds.attrs[k]}")
        lines.append("dimensions: " + ", ".join(f"{k}={v}" for k, v in ds.sizes.items()))
        lines.append("variables:")
        for name, var in {**ds.data_vars, **ds.coords}.items():
            size = var.size * var.dtype.itemsize
            lines.append(f"  {name} ({', '.join(map(str, var.dims))}) {var.dtype} "
                         f"{size / 1e6:.2f} MB")
        probes = sorted({str(x) for x in ds["probe"].values})
        deliveries = sorted({str(x) for x in ds["delivery"].values})
        lines.append(f"probes: {', '.join(probes)}; deliveries: {', '.join(deliveries)}; "
                     f"episodes: {len(set(ds['episode'].values.tolist()))}")
        return "\n".join(lines)
    finally:
        ds.close()


_DEFAULTS = {"window": 1024, "row_tokens": 128}
"""Extraction options left out of a rerun command when at their default."""


def rerun_command(path: str | Path) -> str:
    """The ``belieflens extract`` command that reproduces a cache file, from its attributes.

    Raises :class:`CacheFileError` if the file is unreadable or lacks the
    provenance needed (files written before the options were recorded fall
    back on the individual attributes).
    """
    p = Path(path)
    ds = open_cache(p)
    attrs = dict(ds.attrs)
    ds.close()
    try:
        env = str(attrs["env_name"])
        params = json.loads(str(attrs["env_params"]))
        opts = json.loads(str(attrs["extract_options"])) if "extract_options" in attrs else {
            "episodes": attrs["episodes"], "seed": attrs["seed"],
            "padding_side": attrs.get("padding_side", "right"),
            "resid_dtype": attrs.get("resid_dtype", "float32"),
            "save_logits": bool(attrs.get("save_logits", 0)),
            "reuse_prefix": bool(attrs.get("prefix_reuse", 1)),
        }
        model = str(attrs.get("model_spec") or attrs["model_id"])
    except (KeyError, ValueError, TypeError) as e:
        raise CacheFileError(f"{p} lacks the provenance to rerun it ({e})") from None
    args = ["belieflens", "extract", env]
    for name, value in sorted(params.items()):
        args += ["--set", f"{name}={_value(value)}"]
    args += ["--model", model, "--episodes", str(opts["episodes"]), "--seed", str(opts["seed"])]
    args += ["--device", str(attrs.get("device", "cpu"))]
    args += ["--dtype", str(attrs.get("dtype", "float32"))]
    if "model_kernels" in attrs:  # the kernels that ran, not "auto": the same bits again
        args += ["--kernels", str(attrs["model_kernels"])]
    if str(attrs.get("model_init", "trained")) != "trained":  # an untrained control
        args += ["--init", f"{attrs['model_init']}:{int(attrs.get('model_init_seed', 0))}"]
    flags = [("max_rows", "--batch-size"), ("max_tokens", "--max-tokens"),
             ("row_tokens", "--row-tokens"),
             ("threads", "--threads"), ("padding_side", "--padding"),
             ("resid_dtype", "--resid-dtype"), ("window", "--window"),
             ("max_memory", "--max-memory")]
    for key, flag in flags:  # threads 0 and max_memory 0 are the defaults (torch's, a quarter)
        skip = key in ("threads", "max_memory") and opts[key] == 0 if key in opts else True
        if not skip and _DEFAULTS.get(key) != opts[key]:
            args += [flag, str(opts[key])]
    if opts.get("save_logits"):
        args.append("--save-logits")
    if opts.get("reuse_prefix") is False:
        args.append("--no-prefix-reuse")
    if opts.get("cont_resid"):
        args.append("--cont-resid")
    args += ["--out", str(p)]
    return shlex.join(args)


def _value(v: object) -> str:
    if v is None:
        return "none"
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)
