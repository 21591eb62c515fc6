#!/usr/bin/env bash
# Issue 40's GPU figures in one device call: both benchmarks, each under its own time limit, logs and JSON in $OUT.
#
# Prepare here first (nothing of this travels unless a device call names it in `carry`):
#   benchmarks/gpu_carry.sh                          # .gpu_carry/: ragrade's wheel and the 8 wheels it needs
#   and, for lm-eval's own HFLM beside the method written out, .gpu_carry/lmeval_site/: lm_eval 0.4.13's files
#   without the sub-folders of lm_eval/tasks/, plus dill, pytz, sqlitedict, more_itertools, word2number (with
#   their .dist-info folders); without it the benchmark says HFLM did not run and goes on.
# Then one device call per part, back to back (a machine stays warm only briefly between calls), carry
# [".gpu_carry"]:
#   bash benchmarks/gpu_session.sh mcq      # timeout_s about 240: the 1.1B comparison, bf16 then fp32
#   bash benchmarks/gpu_session.sh grid     # timeout_s about 420: the 7B grid slice and its adaptive run
#   bash benchmarks/gpu_session.sh gen      # timeout_s about 220: batched hf/ generation against one at a time
# (no argument: both, in one call of at most MCQ_S + GRID_S seconds).
#
# Budget (one H200, 2026-11-27): the 1.1B comparison took 255 s with both dtypes and the harness (model built
# on the CPU then); a 7B built on the CPU took 194 s before any scoring, so both scripts now draw the random
# weights on the GPU. bf16 runs every batch size on both harness sides; fp32 (the harness's slow side, about
# 40 s per batch size) runs the sizes that were fastest before (method 128, HFLM 64).
# 2026-11-28 (H200): mcq 210 s with MCQ_S=140, grid 194 s, one bfloat16 gen run (32 requests, 16 new tokens)
# 61 s; 128 requests x 32 new tokens ran past 60 s one at a time. A first call started in about 35 s.
set -uo pipefail
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
MCQ_S=${MCQ_S:-150}
GRID_S=${GRID_S:-400}

nvidia-smi --query-gpu=name,memory.total,memory.used,utilization.gpu --format=csv,noheader
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .gpu_carry/*.whl || exit 9
export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
[ -d .gpu_carry/lmeval_site ] && export PYTHONPATH=$PYTHONPATH:$PWD/.gpu_carry/lmeval_site
python3 -c "import torch, transformers; print('torch', torch.__version__, 'transformers', transformers.__version__)"

quiet() { grep --line-buffered -v -e Warning -e 'Loading weights' -e 'Writing model' -e 'pretrained' -e 'Passed an'; }

PART=${1:-all}
if [ "$PART" = mcq ] || [ "$PART" = all ]; then
    timeout "$MCQ_S" python3 benchmarks/bench_gpu_mcq.py --shape 1b --requests 600 --dtypes bfloat16 \
        --batch-sizes 64,128,256 --harness --harness-batch 64,128,256 --scale 4 --device cuda \
        --json-out "$OUT/mcq_bf16.json" 2>&1 | quiet | tee "$OUT/mcq_bf16.log"
    echo "mcq bf16 exit ${PIPESTATUS[0]}"
    timeout "$MCQ_S" python3 benchmarks/bench_gpu_mcq.py --shape 1b --requests 600 --dtypes float32 \
        --batch-sizes 128 --harness --harness-batch 64 --device cuda --json-out "$OUT/mcq_fp32.json" 2>&1 \
        | quiet | tee "$OUT/mcq_fp32.log"
    echo "mcq fp32 exit ${PIPESTATUS[0]}"
fi
if [ "$PART" = gen ] || [ "$PART" = all ]; then
    for dt in float32 bfloat16; do
        timeout 100 python3 benchmarks/bench_hf_generate.py --device cuda --dtype $dt --hidden 2048 --layers 22 \
            --requests 32 --new 16 2>&1 | quiet | tee "$OUT/gen_$dt.log"
        echo "gen $dt exit ${PIPESTATUS[0]}"
    done
fi
if [ "$PART" = grid ] || [ "$PART" = all ]; then
    timeout "$GRID_S" python3 benchmarks/bench_gpu_grid.py --shape 7b --weights-dtype bfloat16 --device cuda \
        --dtype bfloat16 --adaptive --work /tmp/grid --json-out "$OUT/grid.json" 2>&1 | quiet | tee "$OUT/grid.log"
    echo "grid exit ${PIPESTATUS[0]}"
    cp /tmp/grid/*.log "$OUT/" 2>/dev/null || true
fi
