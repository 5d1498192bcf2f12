#!/usr/bin/env bash
# usage: run.sh NAME [env...] -- [bench args]
cd /work/main
name=$1; shift
envs=(); while [ "$1" != "--" ]; do envs+=("$1"); shift; done; shift
env "${envs[@]}" .venv/bin/python -m mlatui bench scenarios/default.toml --null --phases sweep --contexts 512,1024 --widths 1,2,3 --reps 24 --max-rounds 24 --force --out /tmp/slotx/$name.jsonl "$@" > /tmp/slotx/$name.md 2> /tmp/slotx/$name.log
echo "$name rc $?"
grep -A10 "aa-patched (sweep)" /tmp/slotx/$name.md | grep "^| [0-9]" | awk -F'|' '{print "  ",$2,$3,$6}'
