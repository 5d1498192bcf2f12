"""Scenarios shipped with mlatui (installed as the package `mlatui.scenarios`)."""
