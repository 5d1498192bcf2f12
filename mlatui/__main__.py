"""`python -m mlatui`: the same command line as the `mlatui` script."""

from mlatui.cli import entry

entry()
