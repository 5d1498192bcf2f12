"""`mlatui mtp extract SOURCE --into FOLDER`: restore the MTP head an mlx conversion dropped."""

from __future__ import annotations

import argparse
import sys

from mlatui.errors import UserError

HELP = "restore a converted (mlx-community) folder's MTP head from the original checkpoint"


def epilog() -> str:
    return """example:
  mlatui mtp extract zai-org/GLM-4.7-Flash --into ~/models/GLM-4.7-Flash-4bit
  reads only the index and the shards holding the MTP layer, quantizes it like the folder,
  writes FOLDER/mtp.safetensors + FOLDER/mtp.provenance.json, then drafts a few tokens as a check"""


def configure(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="mtp_action", metavar="ACTION", required=True)
    p = sub.add_parser(
        "extract",
        help="write FOLDER/mtp.safetensors from SOURCE's model.layers.{N}.*",
        description="Read the MTP layer (model.layers.{num_hidden_layers}.*) of SOURCE, an "
        "original checkpoint folder or a hub id, quantize it the way FOLDER's config says and "
        "write it beside FOLDER's weights, where every mlatui run finds it.",
    )
    p.add_argument(
        "source", help="original checkpoint: a folder or a hub id like zai-org/GLM-4.7-Flash"
    )
    p.add_argument(
        "--into", required=True, metavar="FOLDER", help="the mlx model folder to complete"
    )
    p.add_argument(
        "--no-check",
        action="store_true",
        help="skip the self-check (loading FOLDER's model and drafting a few tokens; it fails, "
        "exit 1, when the head's acceptance is implausibly low for a trained head or the drafted "
        "run leaves plain greedy where the target's top-2 logits are not a near-tie)",
    )


def run(args: argparse.Namespace) -> int:
    from mlatui.run.mtp_extract import ExtractError, extract

    def say(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    try:
        done = extract(args.source, args.into, check=not args.no_check, say=say)
    except ExtractError as e:
        raise UserError(str(e)) from None
    for note in done.notes:
        say(note)
    print(f"MTP head: {done.sidecar} ({done.tensors} tensors, {done.quantization})")
    print(f"read from {done.source}: {', '.join(done.files_read)}")
    if done.check is not None:
        print(done.check.line())
        if not done.check.passed:
            return 1
    return 0
