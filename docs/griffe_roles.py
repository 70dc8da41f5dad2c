"""A Griffe extension: the docstrings' Sphinx roles as links of the API reference.

belieflens's docstrings cross-reference with Sphinx roles (``:func:`load```,
``:class:`~belieflens.errors.BeliefLensError```, ``:mod:`.base```). mkdocstrings reads
docstrings as Markdown, so each role becomes an *optional* cross-reference: a link where the
target is rendered somewhere in the site, plain code where it is not (no warning either way,
since the reference pages document the public API, not every module). A paragraph ending in
reST's ``::`` ends in ``:`` (the indented block after it is already a Markdown code block).
"""

from __future__ import annotations

import re
from typing import Any

import griffe

ROLE = re.compile(r":(?:py:)?(?:func|class|meth|mod|data|attr|obj|exc|const):`(?P<target>[^`]+)`")


def _resolve(obj: griffe.Object | griffe.Alias, target: str) -> str | None:
    """The full path of ``target`` as seen from ``obj``'s docstring, if Griffe knows it."""
    collection = obj.modules_collection
    module = obj.module
    candidates: list[str] = []
    if target.startswith("."):
        base = module.path if module.is_init_module else (module.parent or module).path
        candidates.append(f"{base}{target}")
    else:
        scope: griffe.Object | griffe.Alias | None = obj if obj.is_class else obj.parent
        while scope is not None:
            candidates.append(f"{scope.path}.{target}")
            scope = scope.parent
        candidates.append(target)
    for path in candidates:
        try:
            found = collection.get_member(path)
        except (KeyError, ValueError, griffe.AliasResolutionError, griffe.CyclicAliasError):
            continue
        try:
            return str(found.canonical_path)
        except (griffe.AliasResolutionError, griffe.CyclicAliasError):
            return str(found.path)
    return None


def _rewrite(obj: griffe.Object | griffe.Alias, text: str) -> str:
    def link(match: re.Match[str]) -> str:
        target = match["target"].strip()
        short = target.startswith("~")
        target = target.lstrip("~")
        shown = target.rsplit(".", 1)[-1] if short else target.lstrip(".")
        path = _resolve(obj, target)
        if path is None:
            return f"`{shown}`"
        return f'<autoref identifier="{path}" optional><code>{shown}</code></autoref>'

    text = ROLE.sub(link, text)
    return re.sub(r"(?<=\S)::\n\n", ":\n\n", text)


class SphinxRoles(griffe.Extension):
    """Rewrite every docstring of the loaded package once it is loaded."""

    def on_package(self, *, pkg: griffe.Module, **kwargs: Any) -> None:
        seen: set[int] = set()
        stack: list[griffe.Object] = [pkg]
        while stack:
            obj = stack.pop()
            if id(obj) in seen:
                continue
            seen.add(id(obj))
            if obj.docstring is not None:
                obj.docstring.value = _rewrite(obj, obj.docstring.value)
            for member in obj.members.values():
                if not member.is_alias:
                    stack.append(member)  # type: ignore[arg-type]
