"""Fuzz targets for every reader of outside input, the mutations that feed them, and the
long-run driver (`python -m tracefabric.tools.fuzz`)."""
