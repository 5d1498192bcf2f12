"""The MLA gate: thresholds, the per-instance patch of installed mlx-lm, branch counters, how a threshold reads."""
