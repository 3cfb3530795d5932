"""tracefabric: which load-balancing and congestion-control scheme gives the shortest
training iteration for this model on this cluster, and why.

The package root is the foundation every layer stands on (`errors`, `jsonio`, `specs`,
`resources`, and the engine `_core`); the layers are subpackages, each mapped onto a top-level
folder of the repository, each importing only those below it:

    tools (CLI, comparisons, fuzz) > interop (ASTRA-sim) > collectives (workload + system layers)
      > traces (Chakra ETs) | network_backends (packet engine, analytical models)
      > astra_configs (ASTRA-sim formats, scheme presets) > the root"""

from .errors import (
    AstraExtensionWarning,
    ConfigError,
    FlowError,
    MissingDependencyError,
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
    "MissingDependencyError",
    "SchemeParamError",
    "SimulationDidNotFinish",
    "TracefabricError",
    "TrafficFileError",
    "UnknownSchemeError",
    "__version__",
]
