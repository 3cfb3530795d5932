"""The top layer: the `tracefabric` command line (`cli`), scheme comparisons and their charts
(`compare`), and the fuzz targets and driver (`fuzz`). Library calls only: everything these
compose lives in the layers below."""
