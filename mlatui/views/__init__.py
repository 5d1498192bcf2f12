"""What is shown and printed, computed from the event stream alone (pure Python: no mlx, no textual)."""
