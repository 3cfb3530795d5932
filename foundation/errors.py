"""tracefabric's exceptions: one class per kind of bad input or failed run, each
carrying the fields that identify what was wrong, and the mapping of the engine's errors to them."""

from __future__ import annotations



class TracefabricError(Exception):
    """Base class of every error tracefabric raises on purpose."""


class ConfigError(TracefabricError, ValueError):
    """A configuration value is missing, out of range or inconsistent."""

    def __init__(self, message: str, field: str | None = None) -> None:
        super().__init__(message)
        # A user's key, column or token that is the empty string is still named: as ''.
        self.field = "''" if field == "" else "" if field is None else str(field)

    def in_file(self, path: object) -> ConfigError:
        """This error as one about the file `path` (its message then starts with the path)."""
        return ConfigError(f"{path}: {self}", self.field)


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

    def __init__(self, message: str, path: str, line: int | None, field: str | None) -> None:
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


class MissingDependencyError(TracefabricError, ImportError):
    """An optional part of tracefabric is used without the packages it needs (trace capture
    without PyTorch). The message is one line saying what to install."""

    def __init__(self, message: str, package: str, extra: str) -> None:
        super().__init__(message)
        self.package, self.extra = package, extra


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
    return ConfigError(message, field=f.get("field"))


class AstraExtensionWarning(UserWarning):
    """An `analytical:astra-*` run went past what ASTRA-sim 2.x runs (it prints no result for
    that input), using the named tracefabric extension: the number is not ASTRA-compatible."""


class SimulationError(TracefabricError, RuntimeError):
    """A workload cannot run to completion (deadlock) or its network backend failed."""

    def __init__(self, message: str, kind: str) -> None:
        super().__init__(message)
        self.kind = kind


def from_system(err: Exception, system_path: str = "") -> TracefabricError:
    """Map the system layer's SystemLayerError(variant, message[, field]) to its Python class: bad
    workloads and configs are ConfigErrors (a config one names the system file and its key),
    deadlocks, clock overruns and backend failures SimulationErrors."""
    variant, message = err.args[0], err.args[1]
    field = err.args[2] if len(err.args) > 2 else ""
    if variant == "Config":
        return ConfigError(f"{system_path}: {message}" if field and system_path else message, field or "config")
    if variant == "Workload":
        return ConfigError(message, "workload")
    return SimulationError(message, variant.lower())
