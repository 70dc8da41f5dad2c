"""Importer of BayesBench's recommender world: ``fitted_model.json`` + ``movie_selection.json``.

``fitted_model.json`` holds ``n_types``, ``pi``, ``theta`` (movie id -> K x 5
rating distributions), ``movie_names`` and ``movie_genres``;
``movie_selection.json`` holds ``probe_movie_ids`` (the rating sequence, in
order) and ``target_movies`` (held-out movies, each with ``movie_id`` and its
own K x 5 ``theta``). The result is exactly their world.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from belieflens.envs.recommender.world import STARS, World
from belieflens.episodes import importing as io

FITTED = "fitted_model.json"
"""File name of the fitted mixture."""

SELECTION = "movie_selection.json"
"""File name of the movie selection."""


def _table(value: Any, path: Path, field: str, k: int) -> list[list[float]]:
    rows = io.as_list(value, path, field)
    if len(rows) != k:
        raise io.fail(path, field, f"expected {k} rows (one per type), got {len(rows)}")
    return [
        io.as_distribution(r, path, f"{field}[{i}]", size=len(STARS)) for i, r in enumerate(rows)
    ]


def load_world(directory: Path | str) -> World:
    """Read BayesBench's world from ``directory``; malformed files raise ImportFormatError."""
    root = Path(directory)
    fitted_path, sel_path = root / FITTED, root / SELECTION
    fitted = io.read_json(fitted_path)
    sel = io.read_json(sel_path)
    k = io.as_int(io.get(fitted, "n_types", fitted_path, ""), fitted_path, "n_types")
    if k < 2:
        raise io.fail(fitted_path, "n_types", f"expected at least 2 types, got {k}")
    pi = io.as_distribution(io.get(fitted, "pi", fitted_path, ""), fitted_path, "pi", size=k)
    theta = io.get(fitted, "theta", fitted_path, "")
    if not isinstance(theta, dict) or not theta:
        raise io.fail(fitted_path, "theta", "expected a non-empty object of movie id -> table")
    names = io.get(fitted, "movie_names", fitted_path, "")
    genres = io.get(fitted, "movie_genres", fitted_path, "")
    if not isinstance(names, dict):
        raise io.fail(fitted_path, "movie_names", "expected an object of movie id -> title")
    if not isinstance(genres, dict):
        raise io.fail(fitted_path, "movie_genres", "expected an object of movie id -> genres")

    ids: list[str] = []
    tables: list[list[list[float]]] = []
    titles: list[str] = []
    tags: list[tuple[str, ...]] = []
    index: dict[str, int] = {}

    def add(mid: str, table: list[list[float]]) -> int:
        title = io.as_str(names.get(mid, f"Movie {mid}"), fitted_path, f"movie_names.{mid}")
        gs = io.as_list(genres.get(mid, []), fitted_path, f"movie_genres.{mid}")
        tag = tuple(io.as_str(g, fitted_path, f"movie_genres.{mid}[{j}]") for j, g in enumerate(gs))
        index[mid] = len(ids)
        ids.append(mid)
        tables.append(table)
        titles.append(title)
        tags.append(tag)
        return index[mid]

    for mid, value in theta.items():
        add(str(mid), _table(value, fitted_path, f"theta.{mid}", k))

    probe_ids = io.as_list(
        io.get(sel, "probe_movie_ids", sel_path, ""), sel_path, "probe_movie_ids", min_len=1
    )
    sequence: list[int] = []
    for j, raw in enumerate(probe_ids):
        mid = str(io.as_int(raw, sel_path, f"probe_movie_ids[{j}]"))
        if mid not in index:
            raise io.fail(
                sel_path, f"probe_movie_ids[{j}]", f"movie {mid} has no table in {FITTED}"
            )
        sequence.append(index[mid])

    target_list = io.as_list(
        io.get(sel, "target_movies", sel_path, ""), sel_path, "target_movies", min_len=1
    )
    targets: list[int] = []
    for j, entry in enumerate(target_list):
        field = f"target_movies[{j}]"
        mid = str(
            io.as_int(io.get(entry, "movie_id", sel_path, field), sel_path, f"{field}.movie_id")
        )
        table = _table(io.get(entry, "theta", sel_path, field), sel_path, f"{field}.theta", k)
        if mid in index:
            tables[index[mid]] = table
            targets.append(index[mid])
        else:
            targets.append(add(mid, table))
        if targets[-1] in sequence:
            raise io.fail(sel_path, f"{field}.movie_id", f"movie {mid} is also in probe_movie_ids")

    return World(
        pi=np.asarray(pi, dtype=np.float64) / sum(pi),
        phi=_normalised(np.asarray(tables, dtype=np.float64)),
        movie_ids=tuple(ids),
        titles=tuple(titles),
        genres=tuple(tags),
        sequence=tuple(sequence),
        targets=tuple(targets),
        source=str(root),
    )


def _normalised(
    phi: np.ndarray[Any, np.dtype[np.float64]],
) -> np.ndarray[Any, np.dtype[np.float64]]:
    result: np.ndarray[Any, np.dtype[np.float64]] = phi / phi.sum(-1, keepdims=True)
    return result
