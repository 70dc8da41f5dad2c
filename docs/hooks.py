"""MkDocs hooks: the parts of the site generated from the code, so that they cannot rot.

A page asks for a generated part with an HTML comment on a line of its own; the comment is
replaced before the page is converted:

- ``<!-- gen:env NAME -->``: environment ``NAME``'s parameter table (from its ``Params``
  record through :func:`belieflens.envs.describe`), its prompt counts where it is a grid, an
  example read-out built by the environment's own code, and its class's reference;
  ``gen:env-generated`` adds its summary first (the page of an environment without one);
- ``<!-- gen:example NAME?K=V&K=V&at=T -->``: the example read-out of environment ``NAME``
  built with parameters ``K=V`` (as from ``--set``), after evidence turn ``T`` (default 1);
- ``<!-- gen:env-table -->``: every registered environment with its summary and page;
- ``<!-- gen:schema -->``: the cache file's variables (``belieflens.store.file.SCHEMA``);
- ``<!-- gen:dims -->``: the dimension glossary (``belieflens.dims``);
- ``<!-- gen:layers -->``: the layer order ``tests/test_layering.py`` enforces;
- ``<!-- gen:benches -->``: every script under ``bench/`` with what it measures, its command
  and the last line it prints (from its docstring);
- ``<!-- gen:models -->``: the named models: embedded, taught adapters and toys
  (``belieflens.model.load.catalogue``);
- ``<!-- gen:api-functions -->``, ``<!-- gen:api-records -->``: one mkdocstrings entry for
  every function, and every class, that ``belieflens.__all__`` exports.

The nav's "Environments" section lists ``envs.names()``; an environment without a page of
its own under ``docs/environments/`` gets one generated from its class (``<!-- gen:env -->``
alone). An unknown marker, or a marker naming an unknown environment, fails the build.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import File, Files
from mkdocs.structure.pages import Page

MARKER = re.compile(r"^<!-- gen:(?P<kind>[a-z-]+)(?: (?P<arg>[^ ]+))? -->$", re.M)
PLACEHOLDER = "[text the model writes]"
"""What the example read-outs show where a model would write text."""


class _Placeholder:
    """A generator that writes :data:`PLACEHOLDER` (and scores every option alike), so that
    environments whose episodes contain model-written text can be shown without a model."""

    def __call__(self, messages: Any, *, seed: int, max_new_tokens: int,
                 temperature: float) -> str:
        return PLACEHOLDER

    def score(self, queries: Any) -> tuple[tuple[float, ...], ...]:
        return tuple(tuple(0.0 for _ in q.options) for q in queries)


def _cell(value: object) -> str:
    """A Markdown table cell: pipes escaped, newlines folded."""
    return str(value).replace("|", "\\|").replace("\n", " ")


def _default(value: object) -> str:
    if value is None:
        return "`none`"
    if isinstance(value, str):
        return f'`"{value}"`' if value else '`""`'
    return f"`{value}`"


def _summary(name: str) -> str:
    from belieflens import envs

    return envs.describe(name)[0]


def _params_table(name: str) -> str:
    from belieflens import envs

    _, specs = envs.describe(name)
    rows = ["| parameter | type | default | meaning |", "|---|---|---|---|"]
    for s in specs:
        rows.append(f"| `{s.name}` | {_cell(s.type)} | {_cell(_default(s.default))} | "
                    f"{_cell(s.help)} |")
    return "\n".join(rows)


def _text_block(text: str) -> str:
    """A fenced block of prompt text (class ``prompt``: shown as plain text, long lines wrapped by
    ``docs/stylesheets/extra.css``, since a prompt's own line breaks are what it says)."""
    fence = "````" if "```" in text else "```"
    return f"{fence}{{ .text .prompt }}\n{text}\n{fence}"


def _example(name: str, params: dict[str, str] | None = None, at: int = 1) -> str:
    """The first read-out after evidence turn ``at`` (else the last one) of episode 0, seed 0,
    at the default parameters or ``params``, as the environment's code builds it."""
    from belieflens import envs
    from belieflens.episodes.capabilities import NeedsGenerator

    params = params or {}
    env = envs.get(name, **params)
    generated = isinstance(env, NeedsGenerator) and env.requires_generator
    if generated:
        env = env.bind_generator(_Placeholder())
    episode = next(iter(env.episodes(1, 0)))
    turns = [t for t in episode.turns if t.probes]
    turn = turns[min(at, len(turns) - 1)]
    probe = turn.probes[0]
    query = probe.queries[0]
    setting = ", ".join(f"{k}={v}" for k, v in params.items()) or "default parameters"
    call = ", ".join([f'\"{name}\"', *(f"{k}={v!r}" for k, v in params.items())])
    lines = [
        f"Episode 0 (seed 0, {setting}), turn {turn.index}, probe `{probe.name}` "
        f"({probe.kind}), delivery `{probe.delivery}`, rotation {query.rotation} of "
        f"{len(probe.queries)}, built by `belieflens.envs.get({call}).episodes(1, 0)`"
        + (f"; where the model writes text, this page shows `{PLACEHOLDER}`." if generated
           else "."),
        "",
    ]
    if query.format == "chat":
        for m in query.messages:
            lines += [f"**{m.role}**", "", _text_block(m.content), ""]
        lines += [f"**assistant** (prefill, continued by the options): `{query.prefill}`"
                  if query.prefill else "**assistant** (no prefill)", ""]
    elif query.format == "tokens":
        lines += ["**tokens** (each symbol one vocabulary id after the BOS; no text, no chat "
                  "template), continued by the options:", "", _text_block(query.prefill), ""]
    else:
        lines += ["**raw prompt** (no chat template), continued by the options:", "",
                  _text_block(query.prefill), ""]
    rows = ["| position | continuation | outcome | oracle |", "|---|---|---|---|"]
    for pos, (text, out) in enumerate(zip(query.options, query.outcome, strict=True)):
        oracle = "—" if probe.oracle is None else f"{probe.oracle[out]:.4g}"
        rows.append(f"| {pos} | `{_cell(repr(text))}` | {_cell(probe.labels[out])} | {oracle} |")
    lines += rows
    if probe.oracle is None:
        lines += ["", "This probe has no closed-form oracle (— above)."]
    return "\n".join(lines)


def _reference(cls: Any) -> str:
    """The dotted path of the object an environment's page shows: its class, or what a class
    made at import names in its ``reference`` (a token process's environment: the process's
    class, whose source mkdocstrings reads)."""
    return str(getattr(cls, "reference", "") or f"{cls.__module__}.{cls.__qualname__}")


def _env(name: str, *, summary: bool) -> str:
    from belieflens import envs
    from belieflens.api import environment
    from belieflens.envs.revealed.counts import counts_line

    parts = [_summary(name), ""] if summary else []
    parts += ["## Parameters", "",
             f"Set with `--set NAME=VALUE` (CLI) or `params={{...}}` / "
             f"`belieflens.envs.get(\"{name}\", NAME=VALUE)` (Python). Generated from the "
             "environment's `Params` record.", "", _params_table(name)]
    counts = counts_line(name, environment(name))
    if counts:
        parts += ["", f"Prompt counts at the defaults (`belieflens envs` prints them): {counts}."]
    cls = envs.environment_class(name)
    parts += ["", "## An example read-out", "", _example(name), "", "## The class", "",
              f"::: {_reference(cls)}",
              "    options:", "      heading_level: 3", "      show_root_full_path: false",
              "      members: [episodes]"]
    return "\n".join(parts)


def _env_table() -> str:
    from belieflens import envs

    rows = ["| environment | reproduces | what it is |", "|---|---|---|"]
    for name in envs.names():
        source = _front_matter(name).get("source", "")
        rows.append(f"| [`{name}`]({name}.md) | {_cell(source)} | {_cell(_summary(name))} |")
    return "\n".join(rows)


def _schema() -> str:
    from belieflens.store.file import COORDS, REQUIRED, SCHEMA

    rows = ["| variable | dims | stored as | required | meaning |", "|---|---|---|---|---|"]
    for spec in SCHEMA.values():
        role = "coordinate" if spec.name in COORDS else ""
        req = "yes" if spec.name in REQUIRED else ""
        dims = ", ".join(spec.dims)
        rows.append(f"| `{spec.name}` | {dims} | {spec.dtype} | {req} | "
                    f"{_cell(spec.meaning)}{' (coordinate)' if role else ''} |")
    return "\n".join(rows)


def _dims() -> str:
    import belieflens.dims as dims

    doc = inspect.getdoc(dims) or ""
    bullets = [line for line in doc.split("\n\n", 2)[2].splitlines() if line.strip()]
    return "\n".join(bullets)


def _models() -> str:
    from belieflens.model.load import catalogue

    rows = ["| name | model | blocks | size | install | what it is |",
            "|---|---|---|---|---|---|"]
    for m in catalogue():
        size = f"{m.size / 1e6:,.1f} MB adapter" if m.kind == "adapter" else \
            f"{m.size / 1e6:,.0f} MB" if m.kind == "embedded" else f"{m.size / 1e6:,.1f} MB"
        rows.append(f"| `{m.name}` | {m.official_id} | {m.layers} | {size} | "
                    f"`{m.install}` | {_cell(m.description)} |")
    return "\n".join(rows)


def _layers() -> str:
    """The layer order that ``tests/test_layering.py`` enforces, read from its ``LAYERS``."""
    import ast

    source = (Path(__file__).parents[1] / "tests" / "test_layering.py").read_text("utf-8")
    for node in ast.parse(source).body:
        if isinstance(node, ast.AnnAssign) and getattr(node.target, "id", "") == "LAYERS":
            assert node.value is not None
            text = ast.unparse(node.value).replace("ROOT", "'the facade'")
            layers = ast.literal_eval(text)
            return "\n".join(f"{i}. " + ", ".join(f"`{n}`" if n != "the facade" else n
                                                   for n in layer)
                             for i, layer in enumerate(layers, 1))
    raise ValueError("tests/test_layering.py has no LAYERS")


def _benches() -> str:
    """Every script under ``bench/``: what it measures (its docstring's first paragraph), the
    command that runs it and the last line it prints (its ``Run:`` and ``Last line:``)."""
    import ast

    def field(doc: str, name: str) -> str:
        found = re.search(rf"^{name}: (.*?)(?:\n\n|\n[A-Z][a-z]+( line)?: |\Z)", doc, re.S | re.M)
        return " ".join(found.group(1).split()) if found else ""

    rows = ["| script | what it measures | command | prints last |", "|---|---|---|---|"]
    for path in sorted((Path(__file__).parents[1] / "bench").glob("*.py")):
        source = path.read_text("utf-8")
        doc = ast.get_docstring(ast.parse(source)) or ""
        what = " ".join(doc.split("\n\n", 1)[0].split())
        run = field(doc, "Run") or f"``.venv/bin/python -m bench.{path.stem}``"
        last = field(doc, "Last line") or "—"
        if '__name__ == "__main__"' not in source:
            run, last = "(a module the scripts import)", "—"
        rows.append(f"| `{path.name}` | {_cell(_md(what))} | {_cell(_md(run))} | "
                    f"{_cell(_md(last))} |")
    return "\n".join(rows)


def _md(text: str) -> str:
    """reST literals (````x````) as Markdown code, roles as plain code."""
    text = re.sub(r":[a-z]+:`~?([^`]+)`", r"`\1`", text)
    return text.replace("``", "`").rstrip(".")


def _exports() -> Iterator[tuple[str, Any]]:
    import belieflens

    for name in belieflens.__all__:
        if not name.startswith("_"):
            yield name, getattr(belieflens, name)


def _api(kind: str) -> str:
    wanted = inspect.isfunction if kind == "functions" else inspect.isclass
    return "\n\n".join(f"::: belieflens.{name}" for name, obj in _exports() if wanted(obj))


_ENV_DIR = Path(__file__).parent / "environments"


def _front_matter(name: str) -> dict[str, str]:
    """The ``key: value`` lines of an environment page's YAML front matter."""
    page = _ENV_DIR / f"{name}.md"
    if not page.is_file():
        return {}
    text = page.read_text(encoding="utf-8")
    if not text.startswith("---\n"):
        return {}
    head = text[4:].split("\n---\n", 1)[0]
    out = {}
    for line in head.splitlines():
        key, _, value = line.partition(":")
        out[key.strip()] = value.strip().strip('"')
    return out


def _replace(match: re.Match[str], page: Page) -> str:
    kind, arg = match["kind"], match["arg"]
    from belieflens import envs

    if kind in ("env", "env-generated"):
        if arg not in envs.names():
            raise ValueError(f"{page.file.src_uri}: {match[0]} names no registered environment")
        return _env(arg, summary=kind == "env-generated")
    if kind == "example" and arg is not None:
        name, _, query = arg.partition("?")
        if name not in envs.names():
            raise ValueError(f"{page.file.src_uri}: {match[0]} names no registered environment")
        params = dict(p.split("=", 1) for p in query.split("&") if p)
        at = int(params.pop("at", "1"))
        return _example(name, params, at)
    simple = {"env-table": _env_table, "schema": _schema, "dims": _dims, "models": _models,
              "layers": _layers, "benches": _benches,
              "api-functions": lambda: _api("functions"),
              "api-records": lambda: _api("records")}
    if kind not in simple or arg is not None:
        raise ValueError(f"{page.file.src_uri}: unknown marker {match[0]}")
    return simple[kind]()


def on_config(config: MkDocsConfig) -> MkDocsConfig:
    """The nav's Environments section: its index, then one page per registered environment."""
    from belieflens import envs

    for entry in config.nav or []:
        if isinstance(entry, dict) and "Environments" in entry:
            entry["Environments"] = [{"All environments": "environments/index.md"}] + [
                f"environments/{name}.md" for name in envs.names()
            ]
    return config


def on_files(files: Files, config: MkDocsConfig) -> Files:
    """A generated page for each registered environment that has none of its own."""
    from belieflens import envs

    for name in envs.names():
        uri = f"environments/{name}.md"
        if files.get_file_from_path(uri) is None:
            page = f"# `{name}`\n\n<!-- gen:env-generated {name} -->\n"
            files.append(File.generated(config, uri, content=page))
    return files


def on_page_markdown(markdown: str, page: Page, config: MkDocsConfig, files: Files) -> str:
    """Replace every ``<!-- gen:... -->`` marker by what it asks for."""
    return MARKER.sub(lambda m: _replace(m, page), markdown)
