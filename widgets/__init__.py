"""Textual UI for mlatui. Never imports mlx: it renders events from any source."""
