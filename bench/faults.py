"""The storage-fault gate: a small filesystem, SIGTERM at random times, a full disk in analyze.

Every run is the real CLI in a child process (``python -m belieflens.cli.main``) on a tiny
random Llama saved to a temporary folder, so each takes seconds:

1. **small filesystem**: ``extract`` onto a 128 kB tmpfs must be refused in one ``error:``
   line (exit 2) before anything is written;
2. **SIGTERM at random times**: ``extract --checkpoint-seconds 0`` is sent SIGTERM at a
   random moment after its model loaded, ``--kills`` times; each must exit 143 with one
   ``interrupted:`` line, leave no temporary file, and never lose a saved read-out; a run
   that finished first must equal the uninterrupted file (and the next kill starts a new
   run); the last rerun must equal it bit for bit;
3. **full disk during analyze**: a report into a tmpfs is written, the disk filled, and
   ``analyze`` run again: one line, exit 2, the previous report byte for byte, no staging
   folder; then SIGTERM at a random moment of ``analyze``: the previous report or the new
   one, whole.

Steps 1 and 3 mount a tmpfs and need root; where none can be mounted they print
``skipped`` with the reason. No step may print a traceback. The last line is
``faults_gate=pass|fail`` with the counts.

    .venv/bin/python -m bench.faults --kills 5 --seed 1
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np

CLI = [sys.executable, "-m", "belieflens.cli.main"]
STUDY = ["coin-flip", "--set", "turns=4", "--episodes", "6", "--seed", "0", "--threads", "1",
         "--quiet"]


class Gate:
    """The checks so far: each a name and whether it held."""

    def __init__(self) -> None:
        self.results: list[tuple[str, bool]] = []

    def check(self, name: str, ok: bool, detail: str = "") -> None:
        """Record and print one check."""
        self.results.append((name, ok))
        print(f"{'ok  ' if ok else 'FAIL'} {name}{': ' + detail if detail else ''}", flush=True)


def tiny_model(folder: Path) -> Path:
    """A 2-layer random Llama with the embedded tokenizer, saved as a ``--model DIR``."""
    import torch
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    from belieflens.model.load import resolve

    source = resolve("smollm2-135m")
    tok = AutoTokenizer.from_pretrained(source.path, gguf_file=source.gguf_file)
    cfg = LlamaConfig(
        vocab_size=len(tok), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=1024,
        tie_word_embeddings=True, bos_token_id=tok.bos_token_id,
        eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id)
    torch.manual_seed(7)
    model = LlamaForCausalLM(cfg)
    with torch.no_grad():
        model.model.embed_tokens.weight.mul_(50.0)
    model.save_pretrained(folder)
    tok.save_pretrained(folder)
    return folder


def run(args: list[str]) -> subprocess.CompletedProcess[str]:
    """One CLI run to the end."""
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=600,
                          check=False)


def clean_stderr(text: str) -> bool:
    """No traceback in a run's stderr."""
    return "Traceback" not in text


@contextmanager
def tmpfs(folder: Path, size: str) -> Iterator[Path | None]:
    """A tmpfs of ``size`` at ``folder`` (``None`` where none can be mounted)."""
    folder.mkdir(parents=True, exist_ok=True)
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder)],
                       capture_output=True, text=True, check=False)
    if r.returncode != 0:
        print(f"skipped: cannot mount a tmpfs ({r.stderr.strip() or 'not root'})")
        yield None
        return
    try:
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], capture_output=True, check=False)


def same_data(a: Path, b: Path) -> bool:
    """Every variable of two cache files equal bit for bit (NaN equal to NaN)."""
    import xarray as xr

    with xr.open_dataset(a, engine="h5netcdf") as x, xr.open_dataset(b, engine="h5netcdf") as y:
        if sorted(map(str, x.variables)) != sorted(map(str, y.variables)):
            return False
        for name in x.variables:
            u, v = x[name].values, y[name].values
            if u.dtype != v.dtype or u.shape != v.shape:
                return False
            same = (np.array_equal(u, v, equal_nan=True) if u.dtype.kind == "f"
                    else bool((u == v).all()))
            if not same:
                return False
    return True


def small_filesystem(gate: Gate, model: Path, work: Path) -> None:
    """Step 1: extract onto a 128 kB filesystem is refused before writing."""
    with tmpfs(work / "small", "128k") as fs:
        if fs is None:
            return
        r = run(["extract", *STUDY, "--model", str(model), "--out", str(fs / "x.h5")])
        lines = r.stderr.strip().splitlines()
        refused = [ln for ln in lines if ln.startswith("error: not enough space")]
        left = sorted(p.name for p in fs.iterdir() if not p.name.endswith(".lock"))
        gate.check("small fs: refused before writing, one line, exit 2",
                   r.returncode == 2 and len(refused) == 1 and not left
                   and clean_stderr(r.stderr), refused[0] if refused else r.stderr[-300:])


def saved_rows(partial: Path) -> int:
    """Read-outs marked complete in a partial file (0 when there is none)."""
    if not partial.exists():
        return 0
    from belieflens.store.file import read_partial

    return int(read_partial(partial).complete.sum())


def after_load(argv: list[str]) -> tuple[int, float]:
    """Run ``argv`` to the end: its exit code and the seconds it ran after its model loaded."""
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True)
    assert proc.stderr is not None
    t0 = time.perf_counter()
    for line in proc.stderr:
        if "loaded in" in line:
            t0 = time.perf_counter()
    return proc.wait(), time.perf_counter() - t0


def sigterm_once(argv: list[str], delay: float) -> tuple[int, str]:
    """Start ``argv``, send SIGTERM ``delay`` s after its model loaded; exit code, stderr."""
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True)
    assert proc.stderr is not None
    lines: list[str] = []
    for line in proc.stderr:
        lines.append(line)
        if "loaded in" in line:
            break
    time.sleep(delay)
    if proc.poll() is None:
        os.kill(proc.pid, signal.SIGTERM)
    rest = proc.stderr.read()
    return proc.wait(), "".join(lines) + rest


def random_sigterms(gate: Gate, model: Path, work: Path, kills: int,
                    rng: random.Random) -> None:
    """Step 2: SIGTERM at random times, then a rerun equal to the uninterrupted file."""
    ref = work / "ref.h5"
    code, seconds = after_load([*CLI, "extract", *STUDY, "--model", str(model), "--out",
                                str(ref)])
    gate.check("reference extraction", code == 0, f"{seconds:.1f} s after the model loaded")
    out = work / "killed.h5"
    argv = [*CLI, "extract", *STUDY, "--model", str(model), "--checkpoint-seconds", "0",
            "--out", str(out)]
    partial = out.with_name(out.name + ".partial")
    last, interrupted, total = 0, 0, 0
    for k in range(kills):  # later kills aim within the work left
        delay = rng.uniform(0.0, seconds * (1.0 - last / total if total else 1.0))
        code, err = sigterm_once(argv, delay)
        saved = saved_rows(partial)
        said = [ln for ln in err.splitlines() if ln.startswith("interrupted:")]
        temps = [p.name for p in work.iterdir() if p.name.endswith(".new")]
        if out.exists():  # finished first (the signal, if it came, found nothing to stop)
            gate.check(f"kill {k + 1} at {delay:.2f} s: finished first, exit {code}, equal to "
                       "the uninterrupted file", code in (0, 143, -signal.SIGTERM)
                       and clean_stderr(err) and same_data(ref, out))
            out.unlink()  # the next kills start a new run
            last, total = 0, 0
            continue
        if partial.exists():
            from belieflens.store.file import read_partial

            total = read_partial(partial).complete.size
        interrupted += 1
        told = bool(said) and (f"{saved} of " in said[0]
                               or (saved == 0 and "no read-out saved" in said[0]))
        ok = (code == 143 and len(said) == 1 and told
              and saved >= last and not temps and clean_stderr(err))
        gate.check(f"kill {k + 1} at {delay:.2f} s: exit {code}, {saved} saved", ok,
                   said[0] if said else err[-300:])
        last = saved
    code, err = 0, ""
    if not out.exists():
        r = run(["extract", *STUDY, "--model", str(model), "--checkpoint-seconds", "0",
                 "--out", str(out)])
        code, err = r.returncode, r.stderr
    resumed = [ln for ln in err.splitlines() if "resuming" in ln]
    gate.check(f"rerun after {interrupted} SIGTERMs equals the uninterrupted file",
               code == 0 and not partial.exists() and same_data(ref, out)
               and clean_stderr(err), resumed[0] if resumed else err.strip()[-300:])


def snapshot(folder: Path) -> dict[str, bytes]:
    """Every file under ``folder`` and its bytes."""
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file()}


def full_disk_analyze(gate: Gate, work: Path, rng: random.Random) -> None:
    """Step 3: a full disk, then SIGTERM, during analyze: the previous report stays whole."""
    ref = work / "ref.h5"
    with tmpfs(work / "disk", "8m") as fs:
        if fs is None:
            return
        out = fs / "report"
        report = ["analyze", str(ref), "--out", str(out), "--no-decoders", "--no-html"]
        t0 = time.perf_counter()
        r = run(report)
        seconds = time.perf_counter() - t0
        gate.check("first report", r.returncode == 0, f"{seconds:.1f} s")
        before = snapshot(out)
        st = os.statvfs(fs)
        filler = fs / "filler"
        filler.write_bytes(b"\0" * max(0, st.f_bavail * st.f_frsize - 16384))
        r = run(report)
        said = r.stderr.strip()
        staging = [p.name for p in fs.iterdir() if ".partial-" in p.name]
        gate.check("full disk in analyze: one line, exit 2, previous report kept",
                   r.returncode == 2 and said.count("\n") == 0
                   and said.startswith("error: no space left") and snapshot(out) == before
                   and not staging and clean_stderr(r.stderr), said)
        filler.unlink()
        delay = rng.uniform(0.0, seconds)
        proc = subprocess.Popen([*CLI, *report], stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE, text=True)
        time.sleep(delay)
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGTERM)
        err = proc.communicate()[1]
        staging = [p.name for p in fs.iterdir() if ".partial-" in p.name]
        whole = snapshot(out) == before or proc.returncode == 0
        gate.check(f"SIGTERM in analyze at {delay:.2f} s: exit {proc.returncode}, a whole "
                   "report", proc.returncode in (0, 143, -signal.SIGTERM) and whole
                   and not staging and clean_stderr(err), err.strip()[-300:])


def main() -> None:
    """Run the three steps and print ``faults_gate=pass|fail``."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kills", type=int, default=5, help="SIGTERMs sent to extract")
    ap.add_argument("--seed", type=int, default=1, help="seed of the random kill times")
    args = ap.parse_args()
    rng = random.Random(args.seed)
    gate = Gate()
    with tempfile.TemporaryDirectory(prefix="belieflens-faults-") as tmp:
        work = Path(tmp)
        model = tiny_model(work / "model")
        small_filesystem(gate, model, work)
        random_sigterms(gate, model, work, args.kills, rng)
        full_disk_analyze(gate, work, rng)
    failed = sum(not ok for _, ok in gate.results)
    print(f"faults_gate={'pass' if not failed else 'fail'} checks={len(gate.results)} "
          f"failed={failed}")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
