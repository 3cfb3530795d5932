"""Reading JSON files as every layer does: a key given twice in one object, a number or nesting
Python cannot hold, a folder or device where a file was expected are each one line naming the
file (and the field), never a silently kept last value or a 100-line traceback."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

from .errors import ConfigError


class DuplicateKeyError(ValueError):
    """One object of a JSON or YAML file names a key twice (the parsers keep the last one
    silently, so a study would run on a value its author may not have meant)."""

    def __init__(self, key: Any, line: int | None = None) -> None:
        where = f" (line {line})" if line else ""
        super().__init__(f"key {key!r} appears twice in one object{where}")
        self.key, self.line = key, line


def _unique_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise DuplicateKeyError(key)
        out[key] = value
    return out


class JsonLimitError(json.JSONDecodeError):
    """Valid JSON that Python cannot hold: an integer past `sys.get_int_max_str_digits()` digits
    or arrays/objects nested past the recursion limit. A JSONDecodeError, so that every reader
    names the file in one line (they were a 100-line ValueError or a RecursionError)."""


def _too_many_digits(text: str) -> json.JSONDecodeError:
    limit = sys.get_int_max_str_digits() or 4300
    m = re.search(rf"[0-9]{{{limit + 1},}}(?![0-9]*[.eE])", text)  # the integer, not a float's digits
    return JsonLimitError(f"an integer of {len(m.group()) if m else 'over ' + str(limit)} digits, past the "
                          f"{limit} Python reads", text, m.start() if m else 0)


def loads_json(text: str) -> Any:
    """`json.loads`, refusing a key given twice in one object (DuplicateKeyError). A leading
    UTF-8 BOM is skipped, as ASTRA-sim's JSON reader (nlohmann) skips it."""
    text = text.removeprefix("\ufeff")
    try:
        return json.loads(text, object_pairs_hook=_unique_pairs)
    except (json.JSONDecodeError, DuplicateKeyError):
        raise
    except ValueError:  # int() of a number past the digit limit: no other ValueError comes from json
        raise _too_many_digits(text) from None
    except RecursionError:
        raise JsonLimitError(f"arrays or objects nested too deeply for Python (recursion limit "
                             f"{sys.getrecursionlimit()})", text, 0) from None


def not_a_file(path: str | Path, what: str = "") -> str:
    """Why `path` cannot be read as a file (the caller names the path): a folder, a device,
    FIFO or socket is named as what it is; "not found" means nothing is there."""
    what = f"{what} file" if what else "file"
    if Path(path).is_dir():
        return f"is a folder; expected a {what}"
    if Path(path).exists():
        return f"is not a regular file (a device, FIFO or socket); expected a {what}"
    return f"{what} not found"


def load_json(path: str | Path, field: str, what: str = "") -> Any:
    """A JSON file, or a ConfigError naming the file (and `what` it should be) and the field."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"{path}: {not_a_file(path, what)}", field)
    try:
        return loads_json(path.read_text())
    except JsonLimitError as e:
        raise ConfigError(f"{path}: cannot read {e.msg}{f' (line {e.lineno})' if e.pos else ''}", field) from None
    except json.JSONDecodeError as e:
        raise ConfigError(f"{path}: not valid JSON ({e})", field) from None
    except DuplicateKeyError as e:
        raise ConfigError(f"{path}: {e}", str(e.key)) from None
    except UnicodeDecodeError as e:
        raise ConfigError(f"{path}: not UTF-8 text (byte {e.start})", field) from None
