"""Install a training run's output as the embedded model (package data) and write its manifest.

    python -m tools.train.ship --run OUT --data .corpus
    python -m tools.train.ship --run OUT --data .corpus --draft-only        # a distilled draft
    python -m tools.train.ship --run OUT --data .corpus --finetuned LOG...  # a fine-tuned target
    python -m tools.train.ship --run OUT --data .corpus --distilled LOG     # distilled drafts
    python -m tools.train.ship --run OUT --data .corpus --extended          # long-context extension

Copies OUT/model (with its MTP layer, if trained) and OUT/draft (config + safetensors) and the
tokenizer into mlatui/models/embedded/,
rebuilds prompts.json from the held-out files, and writes MANIFEST.json (sha256 of every
shipped file, plus the run's final record).
"""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

from mlatui.models.embedded import EMBEDDED_DIR, MANIFEST_PATH, PROMPTS_PATH, manifest
from tools.train.corpus import build_corpus, make_prompts


def write_prompts(seed: int = 0) -> None:
    prompts = make_prompts(build_corpus(seed=seed))
    PROMPTS_PATH.write_text(
        json.dumps(
            {
                "source": "openings of held-out files of the Python standard library (PSF License): "
                f"tools.train.corpus.make_prompts(build_corpus(seed={seed}))",
                "prompts": prompts,
            },
            indent=1,
        )
        + "\n"
    )


def write_manifest(run_record: dict | None = None) -> dict:
    data = manifest()
    if run_record is not None:
        data["training"] = run_record
    elif MANIFEST_PATH.exists():
        data["training"] = json.loads(MANIFEST_PATH.read_text()).get("training")
    MANIFEST_PATH.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    return data


def install_folder(run: Path, data: Path, name: str, source: str | None = None) -> None:
    """RUN/source's (default: RUN/name's) config and weights, plus the corpus's tokenizer,
    replace the shipped folder `name`."""
    dest = EMBEDDED_DIR / name
    dest.mkdir(parents=True, exist_ok=True)
    for old in dest.glob("*"):
        old.unlink()
    for f in sorted((run / (source or name)).glob("*")):
        if f.suffix in (".json", ".safetensors"):
            shutil.copyfile(f, dest / f.name)
    for tok in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copyfile(data / "tokenizer" / tok, dest / tok)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--run", type=Path, required=True, help="the --out folder of tools.train.train")
    p.add_argument(
        "--data", type=Path, required=True, help="the --out folder of tools.train.prepare"
    )
    p.add_argument(
        "--draft-only",
        action="store_true",
        help="a `train --teacher` run: replace only the draft; the target stays as shipped",
    )
    p.add_argument(
        "--finetuned",
        type=Path,
        nargs="*",
        default=None,
        help="the --out logs (finetune.jsonl) of tools.train.finetune's stages, in order: "
        "--run holds the last stage's model/; replace only the target and its MTP head",
    )
    p.add_argument(
        "--best",
        action="store_true",
        help="with --finetuned: every stage was taken at its RUN/best (the checkpoint it chose "
        "on held-out text; the next stage started from it): ship the last stage's RUN/best",
    )
    p.add_argument(
        "--distilled",
        type=Path,
        default=None,
        help="the training log (distil.jsonl) of tools.train.distil; --run holds the "
        "model/ (shipped target + distilled MTP head) and draft/ it wrote: install those",
    )
    p.add_argument(
        "--extended",
        action="store_true",
        help="a tools.train.extend run: install its target + MTP head and draft (the distil "
        "stage's best where it improved them) and record the run and its longctx-*.json",
    )
    a = p.parse_args(argv)
    if a.extended:
        return ship_extended(a.run, a.data)
    if a.distilled is not None:
        return ship_distilled(a.run, a.data, a.distilled)
    if a.draft_only:
        return ship_draft(a.run, a.data)
    if a.finetuned is not None:
        return ship_finetuned(a.run, a.data, a.finetuned, a.best)
    for name in ("model", "draft"):
        install_folder(a.run, a.data, name)
    lines = [json.loads(x) for x in (a.run / "train.jsonl").read_text().splitlines() if x.strip()]
    start = next(x for x in lines if x.get("event") == "start")  # the first call's
    done = next(x for x in reversed(lines) if x.get("event") == "done")
    keys = ("device", "mlx", "target_params", "draft_params", "mtp_params", "args", "corpus")
    record = {k: start[k] for k in keys if k in start} | done
    write_prompts()
    print(json.dumps(write_manifest(record), indent=1))
    return 0


def ship_finetuned(run: Path, data: Path, logs: list[Path], best: bool = False) -> int:
    """Replace the shipped target and MTP head with a fine-tuned one; MANIFEST keeps the base
    training record and the draft's, and gets `finetune`: per stage, its arguments, its first and
    last evaluation, how it ended and, with `best` (each stage taken at its RUN/best, the next
    one starting from it), the evaluation of the checkpoint taken."""
    if best and not (run / "best" / "config.json").exists():
        raise SystemExit(f"mlatui: error: {run}/best has no model: ship without --best")
    install_folder(run, data, "model", "best" if best else None)
    stages = []
    for log in logs:
        lines = [json.loads(x) for x in log.read_text().splitlines() if x.strip()]
        evals = [x for x in lines if "greedy_distinct_4gram" in x]
        end = next(x for x in reversed(lines) if x.get("event") in ("paused", "done"))
        start = next(x for x in lines if x.get("event") == "start")
        stage = {"log": log.name, "device": start.get("device"), "args": start.get("args"),
                 "first_eval": evals[0], "last_eval": evals[-1], "end": end}  # fmt: skip
        chosen = [x for x in lines if x.get("event") == "best"]
        if best and chosen:
            stage["taken"] = chosen[-1]
        stages.append(stage)
    old = json.loads(MANIFEST_PATH.read_text()) if MANIFEST_PATH.exists() else {}
    keep = {k: old.get(k) for k in ("training", "draft_training")}
    MANIFEST_PATH.write_text(
        json.dumps(manifest() | keep | {"finetune": stages}, indent=1, sort_keys=True) + "\n"
    )
    print(json.dumps([s.get("taken", s["last_eval"]) for s in stages]))
    return 0


def ship_distilled(run: Path, data: Path, log: Path) -> int:
    """Install a `distil` run's model/ and draft/ (whichever it wrote); MANIFEST keeps every
    earlier record and gets `distil`: the training log's arguments, first evaluation, every
    `best` event and how it ended."""
    names = [n for n in ("model", "draft") if (run / n / "config.json").exists()]
    if not names:
        raise SystemExit(f"mlatui: error: {run} has no model/ or draft/: nothing to ship")
    for name in names:
        install_folder(run, data, name)
    lines = [json.loads(x) for x in log.read_text().splitlines() if x.strip()]
    start = next(x for x in lines if x.get("event") == "start")
    end = next(x for x in reversed(lines) if x.get("event") in ("paused", "done"))
    record = {"log": log.name, "installed": names, "start": start, "end": end,
              "best": [x for x in lines if x.get("event") == "best"]}  # fmt: skip
    old = json.loads(MANIFEST_PATH.read_text()) if MANIFEST_PATH.exists() else {}
    keep = {k: old[k] for k in ("training", "finetune", "draft_training") if k in old}
    MANIFEST_PATH.write_text(
        json.dumps(manifest() | keep | {"distil": record}, indent=1, sort_keys=True) + "\n"
    )
    print(json.dumps(record["best"][-1] if record["best"] else end))
    return 0


def ship_draft(run: Path, data: Path) -> int:
    """Replace the shipped draft with a distilled one; MANIFEST keeps the target's training record
    and gets `draft_training` (the run's start record and its last paused/done record)."""
    install_folder(run, data, "draft")
    lines = [json.loads(x) for x in (run / "train.jsonl").read_text().splitlines() if x.strip()]
    start = next(x for x in lines if x.get("event") == "start")
    last = next(x for x in reversed(lines) if x.get("event") in ("paused", "done"))
    evals = [x for x in lines if "valid_agree" in x]
    keys = ("device", "mlx", "draft_params", "args", "teacher", "draft_init")
    record = {k: start[k] for k in keys if k in start} | {"last": last, "last_eval": evals[-1]}
    old = json.loads(MANIFEST_PATH.read_text()) if MANIFEST_PATH.exists() else {}
    keep = {k: old.get(k) for k in ("training", "finetune") if k in old}
    data_out = manifest() | keep | {"draft_training": record}
    MANIFEST_PATH.write_text(json.dumps(data_out, indent=1, sort_keys=True) + "\n")
    print(json.dumps(record["last_eval"]))
    return 0


def _log(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


def ship_extended(run: Path, data: Path) -> int:
    """Install a `tools.train.extend` run: the distil stage's best model/ and draft/ where it
    wrote them, else the target stage's model/ and the scaled draft it started from. MANIFEST
    keeps every earlier record and gets `long_context`: the run's arguments and RoPE overrides,
    each stage's end, and the position-bucketed measures of RUN/longctx-*.json."""
    distilled = run / "distil"
    sources = {
        "model": next(f for f in (distilled / "model", run / "model") if (f / "config.json").exists()),
        "draft": next(f for f in (distilled / "draft", distilled / "last" / "draft", run / "base" / "draft")
                      if (f / "config.json").exists()),
    }  # fmt: skip
    for name, folder in sources.items():
        install_folder(folder.parent, data, name, folder.name)
    lines, dlines = _log(run / "extend.jsonl"), _log(distilled / "distil.jsonl")
    start = next(x for x in lines if x.get("event") == "start")
    record = {
        "args": start["args"] | {"seq": int(start["args"]["seq"])},
        "device": start["device"], "mlx": start["mlx"], "overrides": start["overrides"],
        "target": next(x for x in lines if x.get("event") == "target-done"),
        "target_last": [x for x in lines if x.get("stage") == "target"][-1:],
        "distil_start": {k: v for k, v in dlines[0].items() if k.startswith("valid_")},
        "distil_best": [x for x in dlines if x.get("event") == "best"][-1:],
        "distil_end": next(x for x in reversed(dlines) if x.get("event") in ("paused", "done")),
        "installed_from": {k: str(v.relative_to(run)) for k, v in sources.items()},
        "measured": {f.stem: json.loads(f.read_text()) for f in sorted(run.glob("longctx-*.json"))},
    }  # fmt: skip
    old = json.loads(MANIFEST_PATH.read_text()) if MANIFEST_PATH.exists() else {}
    keep = {k: old[k] for k in ("training", "finetune", "draft_training", "distil") if k in old}
    MANIFEST_PATH.write_text(
        json.dumps(manifest() | keep | {"long_context": record}, indent=1, sort_keys=True) + "\n"
    )
    print(json.dumps({k: record[k] for k in ("target", "distil_end", "installed_from")}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
