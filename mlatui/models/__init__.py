"""mlx-lm model types that mlatui registers (the embedded model)."""
