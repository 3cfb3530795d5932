"""The workload and system layers. The Rust crate in this folder (`tracefabric-collectives`)
walks per-rank ET graphs and turns collectives into flow DAGs (ring, direct, recursive
doubling, halving-doubling, double binary tree, hierarchical per network dimension);
`workload.py` reads Chakra ETs for it and `microbenchmark.py` writes collective
microbenchmarks. Run a workload with `tracefabric.iteration.simulate`."""
