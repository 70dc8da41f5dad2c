"""Reading imported JSON files with one clear error line per defect.

Every failure raises :class:`~belieflens.errors.ImportFormatError` whose message
names the file and the field (a dotted path such as ``storyboard[2].content``).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol, TypeVar

from belieflens.errors import ImportFormatError


def one_line(text: str) -> str:
    """``text`` with line breaks escaped, so an error built from file content stays one line."""
    return text.replace("\r", "\\r").replace("\n", "\\n")


def fail(path: Path | str, field: str, problem: str) -> ImportFormatError:
    """The uniform one-line import error: file, field, what is wrong."""
    where = f"field '{field}'" if field else "top level"
    return ImportFormatError(one_line(f"{path}: {where}: {problem}"))


def field_error(source: str, field: str, why: str) -> ImportFormatError:
    """The one-line error of an item set (questions, scenarios): source, field, what is wrong."""
    return ImportFormatError(one_line(f"{source}: field '{field}' {why}"))


class _Identified(Protocol):
    @property
    def id(self) -> str:
        """The item's unique name within its set."""
        ...


ItemT = TypeVar("ItemT", bound=_Identified)


def parse_items(
    data: object, source: str, key: str, item: Callable[[str, int, object], ItemT]
) -> tuple[ItemT, ...]:
    """Decoded JSON ``{key: [...]}`` validated as a non-empty list of items with unique ids.

    ``item(source, i, raw)`` validates the ``i``-th item; ``source`` names the set in errors.
    """
    if not isinstance(data, dict) or key not in data:
        raise field_error(source, key, f"is missing (expected an object with a '{key}' list)")
    items = data[key]
    if not isinstance(items, list) or not items:
        raise field_error(source, key, "must be a non-empty list")
    out = tuple(item(source, i, raw) for i, raw in enumerate(items))
    seen: set[str] = set()
    for i, x in enumerate(out):
        if x.id in seen:
            raise field_error(source, f"{key}[{i}].id", f"repeats id {x.id!r}")
        seen.add(x.id)
    return out


def read_json(path: Path) -> Any:
    """The parsed JSON content of ``path``; a missing or unparsable file is one error line."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ImportFormatError(f"{path}: file not found") from None
    except OSError as e:
        raise ImportFormatError(f"{path}: cannot be read ({e.strerror})") from None
    except UnicodeDecodeError as e:
        raise ImportFormatError(f"{path}: not UTF-8 text (byte {e.start})") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise ImportFormatError(
            f"{path}: not valid JSON (line {e.lineno}, column {e.colno}: {e.msg})"
        ) from None
    except (ValueError, RecursionError) as e:  # too many digits, or nested too deeply
        raise ImportFormatError(f"{path}: not valid JSON ({str(e).splitlines()[0]})") from None


def get(obj: Any, key: str, path: Path | str, field: str) -> Any:
    """``obj[key]`` where ``obj`` must be a JSON object holding ``key``."""
    if not isinstance(obj, dict):
        raise fail(path, field, "expected a JSON object")
    if key not in obj:
        name = f"{field}.{key}" if field else key
        raise fail(path, name, "missing")
    return obj[key]


def as_str(value: Any, path: Path | str, field: str, *, nonempty: bool = True) -> str:
    """``value`` checked to be a (non-empty) string."""
    if not isinstance(value, str) or (nonempty and not value.strip()):
        raise fail(path, field, f"expected a non-empty string, got {_short(value)}")
    return value


def as_list(value: Any, path: Path | str, field: str, *, min_len: int = 0) -> list[Any]:
    """``value`` checked to be a list of at least ``min_len`` items."""
    if not isinstance(value, list):
        raise fail(path, field, f"expected a list, got {_short(value)}")
    if len(value) < min_len:
        raise fail(path, field, f"expected at least {min_len} items, got {len(value)}")
    return value


def as_int(value: Any, path: Path | str, field: str) -> int:
    """``value`` checked to be an integer (a bool is not one)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise fail(path, field, f"expected an integer, got {_short(value)}")
    return value


def as_distribution(
    value: Any, path: Path | str, field: str, *, size: int | None = None, tol: float = 1e-4
) -> list[float]:
    """``value`` checked to be finite non-negative numbers summing to 1 (within ``tol``)."""
    items = as_list(value, path, field, min_len=1)
    if size is not None and len(items) != size:
        raise fail(path, field, f"expected {size} probabilities, got {len(items)}")
    out: list[float] = []
    for j, x in enumerate(items):
        if isinstance(x, bool) or not isinstance(x, (int, float)) or not (
                0 <= x <= 1e300 and math.isfinite(x)):
            raise fail(path, f"{field}[{j}]", f"expected a probability, got {_short(x)}")
        out.append(float(x))
    total = sum(out)
    if abs(total - 1.0) > tol:
        raise fail(path, field, f"probabilities sum to {total:.6g}, not 1")
    return out


def _short(value: Any) -> str:
    text = json.dumps(value) if not isinstance(value, str) else repr(value)
    return text if len(text) <= 40 else text[:37] + "..."
