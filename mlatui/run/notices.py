"""The log lines a run opens with after its header: estimates, warnings, what kind of run."""

from __future__ import annotations

from mlatui.config.run_plan import RunPlan
from mlatui.gate import mla
from mlatui.models.fit import context_warnings, largest_context
from mlatui.models.loading import Loaded
from mlatui.models.vlm import indexer_notices
from mlatui.run.phases.indexer_sites import load_warnings

NULL_NOTICE = (
    "A/A null run: both arms run the same variant (every gated layer, dense and "
    "sparse, and every draft); any difference is the harness's own bias"
)
RANDOM_LATENTS_WARNING = (
    "caches filled with random latents (timing only: branch costs do not depend "
    "on the values; outputs and acceptance mean nothing)"
)


def arms_notices(
    runtime: str, arms: dict, null: bool
) -> tuple[tuple[str, str], list[tuple[str, str]]]:
    """The runtime and what each arm slot runs (first in the log); a warning for each slot
    whose source tree's gate mlatui cannot count. An A/A names the slots A and B: each pass runs
    one variant in both, so 'stock slot' / 'patched slot' would name what did not run there."""
    label = {slot: arms[slot]["label"] for slot in ("stock", "patched")}
    if null:
        said = (
            f"runtime: {runtime} · A/A: slots A and B both run stock = {label['stock']} "
            f"(pass aa-stock), then both patched = {label['patched']} (pass aa-patched)"
        )
    else:
        said = (
            f"runtime: {runtime} · arms: stock slot = {label['stock']} · patched slot = "
            + label["patched"]
        )
    uncounted = []
    for slot in ("stock", "patched"):  # a source tree whose gate mlatui cannot count
        if arms[slot].get("counters"):
            name = (
                f"the {slot} variant (slots A and B of pass aa-{slot})" if null else f"{slot} slot"
            )
            uncounted.append(
                (
                    "warning",
                    f"{name} ({label[slot]}): {arms[slot]['counters']}; it runs as the tree wrote it",
                )
            )
    return ("info", said), uncounted


def opening_notices(
    loaded: Loaded,
    plan: RunPlan,
    report: mla.PatchReport,
    fit: tuple[list[str], list[str]],
) -> list[tuple[str, str]]:
    """(level, text) in the order they are logged: the load's notes (`fit`: the memory check's
    notes and warnings), every warning about contexts the model cannot serve, the patched arm's
    summary, then the A/A and random-fill notices."""
    scenario, null = plan.scenario, plan.null
    fit_notes, fit_warnings = fit
    longest = largest_context(scenario)
    notices = [("info", note) for note in fit_notes]
    if loaded.mtp_missing:  # the run goes on without it: say why, and how to restore it
        notices.append(("warning", loaded.mtp_missing))
    notices += [("info", note) for note in loaded.draft_notes]
    warnings = list(fit_warnings)
    if loaded.name == "embedded":
        from mlatui.models.embedded import trained_window

        args = getattr(loaded.model, "args", None)
        limit = getattr(args, "max_position_embeddings", None)
        warnings.extend(context_warnings({"max_position_embeddings": limit}, longest))
        decoded = largest_context(scenario, decoded_only=True)
        warnings.extend(context_warnings({}, decoded, trained_window()))
    warnings.extend(load_warnings(loaded.model, loaded.name, scenario.phases))
    notices += [("info", fact) for fact in indexer_notices(loaded.model)]  # a runtime's own indexer
    notices += [("warning", w) for w in warnings]
    # an A/A's first pass runs the stock variant in both slots: say so, not "patched arm"
    who = "slots A and B (aa-stock pass, then aa-patched)" if null else "patched arm"
    notices.append(("info", f"{who}: {report.summary()}"))
    if null:
        notices.append(("info", NULL_NOTICE))
    if plan.fill == "random-latents":
        notices.append(("warning", RANDOM_LATENTS_WARNING))
    if _on_reference_blas():
        notices.append(("warning", REFERENCE_BLAS_WARNING))
    return notices


REFERENCE_BLAS_WARNING = (
    "the CPU runs the bundled reference BLAS (a few GFLOP/s): every matmul is compute-bound, so a "
    "verify step of width 2 costs about twice a plain step and speculation cannot win on either "
    "arm; unset MLATUI_BLAS (or apt-get install libopenblas0-pthread) to see the story"
)


def _on_reference_blas() -> bool:
    """The run computes on the CPU through the reference BLAS the mlx wheel bundles."""
    import mlx.core as mx

    from mlatui.host.blas import blas_in_use

    return mx.default_device() == mx.cpu and blas_in_use().startswith("bundled reference BLAS")
