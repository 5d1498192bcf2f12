"""mlatui: stock vs patched MLA attention, side by side, live.

Importing it touches nothing: the CLI's entry chooses the CPU BLAS before MLX loads
(mlatui.host.blas.choose_blas)."""

__version__ = "0.1.0"
