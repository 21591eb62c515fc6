#!/usr/bin/env bash
# Wheels that a GPU machine lacks for `ragrade exam take --llm hf/... ` with BM25 (benchmarks/bench_gpu_grid.py).
#
# The device image ('cuda', Python 3.12; /work/.library/device/KINDS.md) already holds torch, transformers,
# tokenizers, safetensors, accelerate, numpy, scipy, pandas, pyarrow, numba, jinja2, click, rich, shellingham,
# annotated-doc, psutil, pytest (the tests' tokenizer builder) and typer. What `exam take` imports at run time
# beyond those (traced here with an hf/ model, closed/oracle/BM25 and --adaptive):
#   pure Python: pydantic, annotated-types, typing-inspection, typing_extensions (pydantic wants a recent one),
#                bm25s, typer (the image has one; this pins the version ragrade is tested with)
#   binary, cp312 manylinux x86-64: pydantic_core, PyStemmer (BM25's English stemmer)
# plus a wheel of ragrade built from this checkout. Versions come from constraints.txt. No torch, no MiniLM
# (dense retrieval is off on the GPU machine), no orjson (bm25s falls back to json without it).
#
# Usage (here, from any folder): benchmarks/gpu_carry.sh [DEST]   (DEST default: .gpu_carry in the repo root,
# which must be git-ignored so that it travels only when a device call names it in `carry`).
# On the device (carry .gpu_carry), one line installs them beside the image's packages:
#   python3 -m pip install -q --no-index --no-deps --no-compile --find-links .gpu_carry --target /tmp/site .gpu_carry/*.whl && export PYTHONPATH=/tmp/site
# (--no-deps: ragrade's metadata pins torch==2.13.0, which the image does not have and must keep.)
# then, e.g.:
#   PYTHONUNBUFFERED=1 python3 benchmarks/bench_gpu_grid.py --shape 7b --weights-dtype bfloat16 --device cuda --dtype bfloat16 --adaptive --work /tmp/grid --json-out $OUT/grid.json
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
DEST=${1:-$ROOT/.gpu_carry}
PY=${PY:-$ROOT/.venv/bin/python}
LIMIT_MIB=64
PURE=(pydantic annotated-types typing-inspection typing_extensions bm25s typer)
BINARY=(pydantic_core PyStemmer)
PLATFORMS=(manylinux_2_28_x86_64 manylinux_2_27_x86_64 manylinux_2_17_x86_64 manylinux2014_x86_64 manylinux1_x86_64)

pin() {  # NAME==VERSION from constraints.txt (names compared as pip does: case, '-', '_' and '.' alike)
    local want got
    want=$(echo "$1" | tr 'A-Z_.' 'a-z--')
    got=$(grep -v '^#' "$ROOT/constraints.txt" | while IFS= read -r line; do
        name=${line%%==*}
        [ "$(echo "$name" | tr 'A-Z_.' 'a-z--')" = "$want" ] && echo "$line"
    done | head -n1)
    [ -n "$got" ] || { echo "gpu_carry: $1 is not pinned in constraints.txt" >&2; exit 1; }
    echo "${got%%;*}"
}

rm -rf "$DEST"
mkdir -p "$DEST"
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

# ragrade, built from a copy of the checkout (no build/ or egg-info written into the tree)
mkdir -p "$TMP/ragrade"
cp "$ROOT/pyproject.toml" "$ROOT/README.md" "$TMP/ragrade/"
tar -C "$ROOT" --exclude='__pycache__' --exclude='*.egg-info' --exclude='*.pyc' -cf - src | tar -C "$TMP/ragrade" -xf -
"$PY" -m pip wheel -q --no-deps --no-build-isolation -w "$DEST" "$TMP/ragrade"

platform_args=(--python-version 3.12 --implementation cp --abi cp312 --abi abi3 --abi none)
for p in "${PLATFORMS[@]}"; do platform_args+=(--platform "$p"); done
pins=()
for name in "${PURE[@]}" "${BINARY[@]}"; do pins+=("$(pin "$name")"); done
"$PY" -m pip download -q --no-deps --only-binary=:all: "${platform_args[@]}" -d "$DEST" "${pins[@]}"

for whl in "$DEST"/*.whl; do
    case "$(basename "$whl")" in
        *-none-any.whl) kind="pure Python" ;;
        *) kind="binary" ;;
    esac
    printf '%8s  %-12s %s\n' "$(du -k "$whl" | cut -f1)K" "$kind" "$(basename "$whl")"
done
total_kib=$(du -sk "$DEST" | cut -f1)
echo "gpu_carry: $DEST holds $(ls "$DEST" | wc -l) wheels, $((total_kib / 1024)) MiB ($total_kib KiB)"
if [ "$total_kib" -ge $((LIMIT_MIB * 1024)) ]; then
    echo "gpu_carry: over the ${LIMIT_MIB} MiB that a device call carries" >&2
    exit 1
fi
