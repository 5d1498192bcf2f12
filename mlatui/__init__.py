"""mlatui: stock vs patched MLA attention, side by side, live."""

from mlatui.host.blas import preload_fast_blas

__version__ = "0.1.0"

preload_fast_blas()
