"""The process and the machines it runs on: BLAS, memory, signals, the process group."""
