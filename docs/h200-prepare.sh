#!/usr/bin/env bash
# Prepares MLX-for-CUDA wheels to carry to the lent H200 (python 3.12, x86_64, no registry there),
# split so that each call's carry plus the project's tree stays under 64 MiB. With the tree at ~45 MB
# the ~90 MB mlx-cuda-13 wheel travels in 5 parts (6 once the tree passed 46 MiB): calls 1-4 carry .whlp00..03 (command
# `cp .whlpNN/part.NN /tmp/`), the next call carries .whlq (the last part, mlx, mlx-lm, platformdirs,
# msgspec and install.sh): `bash .whlq/install.sh; export PYTHONPATH=/tmp/site:. PYTHONUNBUFFERED=1; ...`.
# Calls back to back: a machine stays warm ~30 s after a call (/tmp survives while it is held).
# Usage, from the project root: bash docs/h200-prepare.sh [PARTS] [MLX_VERSION] [MLX_LM_VERSION]
set -euo pipefail
parts=${1:-5}
mlx=${2:-0.32.4}
mlxlm=${3:-0.32.2}
cd "$(git rev-parse --show-toplevel)"
mkdir -p "$(git rev-parse --git-path info)"
exclude=$(git rev-parse --git-path info/exclude)
last=$(printf '%02d' $((parts - 1)))
for d in $(seq -f '/.whlp%02g/' 0 $((parts - 2))) /.whlq/ /.whltmp/; do
  grep -qxF "$d" "$exclude" 2>/dev/null || echo "$d" >> "$exclude"
done
rm -rf .whlp* .whlq .whltmp && mkdir -p .whltmp .whlq
plat=(--only-binary=:all: --python-version 3.12 --implementation cp --platform manylinux_2_35_x86_64
      --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64)
python3 -m pip download -q --no-deps "${plat[@]}" -d .whltmp "mlx==$mlx" "mlx-cuda-13==$mlx" "msgspec>=0.19,<1"
python3 -m pip download -q --no-deps -d .whltmp "mlx-lm==$mlxlm" platformdirs
cuda=$(ls .whltmp/mlx_cuda_13-*.whl)
split -n "$parts" -d "$cuda" .whltmp/part.
for i in $(seq -f '%02g' 0 $((parts - 2))); do mkdir -p ".whlp$i" && mv ".whltmp/part.$i" ".whlp$i/"; done
mv ".whltmp/part.$last" .whltmp/mlx-*.whl .whltmp/mlx_lm-*.whl .whltmp/platformdirs-*.whl .whltmp/msgspec-*.whl .whlq/
name=$(basename "$cuda")
cat > .whlq/install.sh <<INNER
#!/usr/bin/env bash
# on the device, after calls 1-$((parts - 1)) copied part.00..part.$(printf '%02d' $((parts - 2))) to /tmp
set -euo pipefail
here=\$(cd "\$(dirname "\$0")" && pwd)
cat \$(for i in \$(seq -f '%02g' 0 $((parts - 2))); do echo /tmp/part.\$i; done) "\$here/part.$last" > "/tmp/$name"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site "/tmp/$name" "\$here"/mlx-*.whl "\$here"/mlx_lm-*.whl "\$here"/platformdirs-*.whl "\$here"/msgspec-*.whl
PYTHONPATH=/tmp/site python3 -c 'import mlx.core as mx; print("mlx", mx.__version__, mx.default_device())'
INNER
chmod +x .whlq/install.sh
rm -rf .whltmp
du -sh .whlp* .whlq
