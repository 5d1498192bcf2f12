"""Standalone benchmarks: forced absorbed vs materialised attention, the sparse indexer kernels."""
