"""tracefabric: which load-balancing and congestion-control scheme gives the shortest
training iteration for this model on this cluster, and why.

Layers (each a subpackage, mapped onto the repository's top-level folders):
`traces` (Chakra ETs) -> `collectives` (flow DAGs) -> `network_backends` (packet engine,
analytical models) -> this package's CLI, comparisons and plots. `astra_configs` holds
configuration data and scheme presets."""

from .errors import (
    AstraExtensionWarning,
    ConfigError,
    FlowError,
    SchemeParamError,
    SimulationDidNotFinish,
    TracefabricError,
    TrafficFileError,
    UnknownSchemeError,
)

__version__ = "0.1.0"

__all__ = [
    "AstraExtensionWarning",
    "ConfigError",
    "FlowError",
    "SchemeParamError",
    "SimulationDidNotFinish",
    "TracefabricError",
    "TrafficFileError",
    "UnknownSchemeError",
    "__version__",
]
