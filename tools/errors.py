"""tracefabric's exceptions: one class per kind of bad input or failed run, each
carrying the fields that identify what was wrong."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any


class TracefabricError(Exception):
    """Base class of every error tracefabric raises on purpose."""


class ConfigError(TracefabricError, ValueError):
    """A configuration value is missing, out of range or inconsistent."""

    def __init__(self, message: str, field: str = "") -> None:
        super().__init__(message)
        self.field = field


class UnknownSchemeError(ConfigError):
    """A scheme or preset name that is not registered."""

    def __init__(self, message: str, family: str, name: str, known: list[str]) -> None:
        super().__init__(message, field=family)
        self.family, self.name, self.known = family, name, known


class SchemeParamError(ConfigError):
    """A scheme parameter the scheme does not take, or with a bad value."""

    def __init__(self, message: str, family: str, scheme: str, param: str) -> None:
        super().__init__(message, field=param)
        self.family, self.scheme, self.param = family, scheme, param


class FlowError(ConfigError):
    """A flow of the traffic input that cannot be simulated."""

    def __init__(self, message: str, index: int, field: str) -> None:
        super().__init__(message, field=field)
        self.index = index


class TrafficFileError(ConfigError):
    """A traffic file (CSV, JSON or htsim connection matrix) that cannot be read."""

    def __init__(self, message: str, path: str, line: int | None, field: str) -> None:
        # `line` is a line of a CSV or .cm file, but the 1-based position of a flow in a JSON
        # list (the parser keeps no lines), and is named as such.
        if line is None:
            where = path
        elif path.lower().endswith(".json"):
            where = f"{path}: flow {line}"
        else:
            where = f"{path}:{line}"
        super().__init__(f"{where}: {message}", field=field)
        self.path, self.line = path, line


class SimulationDidNotFinish(TracefabricError, RuntimeError):
    """The run stopped before every flow completed (limits reached, stuck flows, cancelled)."""

    def __init__(self, message: str, unfinished: int, total: int) -> None:
        super().__init__(message)
        self.unfinished, self.total = unfinished, total


def from_engine(err: Exception) -> TracefabricError:
    """Map the Rust engine's EngineError(variant, message, fields) to its Python class."""
    variant, message, fields = err.args
    f = dict(fields)
    if variant == "UnknownScheme":
        return UnknownSchemeError(message, f["family"], f["name"], f["known"].split(", "))
    if variant == "BadSchemeParam":
        return SchemeParamError(message, f["family"], f["scheme"], f["param"])
    if variant == "BadFlow":
        return FlowError(message, int(f["index"]), f["field"])
    if variant == "DidNotFinish":
        return SimulationDidNotFinish(message, int(f["unfinished"]), int(f["total"]))
    return ConfigError(message, field=f.get("field", ""))


class AstraExtensionWarning(UserWarning):
    """An `analytical:astra-*` run went past what ASTRA-sim 2.x runs (it prints no result for
    that input), using the named tracefabric extension: the number is not ASTRA-compatible."""


class SimulationError(TracefabricError, RuntimeError):
    """A workload cannot run to completion (deadlock) or its network backend failed."""

    def __init__(self, message: str, kind: str) -> None:
        super().__init__(message)
        self.kind = kind


def from_system(err: Exception, system_path: str = "") -> TracefabricError:
    """Map the system layer's SystemError(variant, message[, field]) to its Python class: bad
    workloads and configs are ConfigErrors (a config one names the system file and its key),
    deadlocks, clock overruns and backend failures SimulationErrors."""
    variant, message = err.args[0], err.args[1]
    field = err.args[2] if len(err.args) > 2 else ""
    if variant == "Config":
        return ConfigError(f"{system_path}: {message}" if field and system_path else message, field or "config")
    if variant == "Workload":
        return ConfigError(message, "workload")
    return SimulationError(message, variant.lower())


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
    """Why `path` cannot be read as a file (the caller names the path). A folder is said to be
    one: "file not found" sent users looking for a typo in a path that exists; so is a device,
    FIFO or socket (/dev/null was "not found")."""
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
