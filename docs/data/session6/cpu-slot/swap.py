import sys, os
import mlatui.run.phases.base as base
from mlatui.run.arms import recopy_in_place
mode = os.environ.get("SWAPMODE", "swap")
def fresh_copies(ctx, recopy):
    def between(i):
        s = ctx.workers["stock"].arm.cache; p = ctx.workers["patched"].arm.cache
        if mode == "swap+copy":
            for name in ("stock", "patched") if i % 2 == 0 else ("patched", "stock"):
                ctx.workers[name].call(recopy)
        s[:], p[:] = p[:], s[:]
    return between
base.fresh_copies = fresh_copies
from mlatui.cli import main
sys.exit(main(sys.argv[1:]))
