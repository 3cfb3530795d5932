"""Collective algorithms as flow DAGs (ring, direct, recursive doubling, halving-doubling,
double binary tree, hierarchical). Not built yet: see the workload/system-layer issue."""
