from mlatui.cli import entry

entry()
