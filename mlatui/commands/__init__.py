"""One module per subcommand (see mlatui/cli.py)."""
