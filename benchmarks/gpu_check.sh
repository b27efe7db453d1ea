#!/usr/bin/env bash
# The checks skset runs on a CUDA machine, in one call: persistence of GPU-fitted models (checked
# afterwards on a CPU machine with `persist_gpu_check.py check`), the README's main job on the GPU
# and on the CPU, the test suite (estimators default to device="auto": the GPU), one Set
# Transformer training epoch on the GPU and on the CPU, the OTK transform benchmark on the GPU, and
# whether ABC's labels of an instance change with the rest of X there (part "abc"). Not run unless
# named: "dk", DilatedKernelFeatures + ridge on two long suite series on the GPU and on the CPU
# (the suite's data from `python benchmarks/suite_data.py --dump DIR` and SKSET_SUITE_DATA=DIR).
# Each part has its own time limit; logs and results go to $OUT.
#
#   OUT=/tmp/gpu bash benchmarks/gpu_check.sh                    # from the repository root
#   PARTS="suite st" OUT=/tmp/gpu bash benchmarks/gpu_check.sh   # some parts only
#
# Test dependencies missing there can be installed first from wheels in .whl/ (pip --no-index).
set -u
OUT=${OUT:-/tmp/skset_gpu}
PARTS=${PARTS:-"persist main suite st otk abc"}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 OMP_WAIT_POLICY=PASSIVE PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
PY=${PY:-python3}
has() { case " $PARTS " in *" $1 "*) return 0;; esac; return 1; }
if ls .whl/*.whl >/dev/null 2>&1; then
  $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl \
    && export PYTHONPATH=$PYTHONPATH:/tmp/site
fi
{
  date -u; nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv
  $PY -c "import torch, sklearn, numpy, scipy, os; print('torch', torch.__version__, 'cuda', torch.cuda.is_available(), torch.cuda.get_device_name(0) if torch.cuda.is_available() else '-', 'sklearn', sklearn.__version__, 'numpy', numpy.__version__, 'scipy', scipy.__version__, 'cores', os.cpu_count())"
  git log -1 --format='commit %H %cd' 2>/dev/null || true
} 2>&1 | tee "$OUT/env.txt"
: > "$OUT/bench.log"

if has persist; then
  echo "== persistence: fit on the GPU, pickle + skset.save" | tee -a "$OUT/bench.log"
  mkdir -p /tmp/persist && timeout "${PERSIST_S:-60}" $PY benchmarks/persist_gpu_check.py write /tmp/persist 2>&1 | tee -a "$OUT/bench.log"
  tar -C /tmp -cf "$OUT/persist.tar" persist
fi
if has main; then
  echo "== main job on the GPU (device=auto)" | tee -a "$OUT/bench.log"
  ( time timeout "${MAIN_S:-90}" $PY examples/japanese_vowels_otk.py ) 2>&1 | tee -a "$OUT/bench.log"
  echo "== main job on the CPU (CUDA_VISIBLE_DEVICES empty)" | tee -a "$OUT/bench.log"
  ( time CUDA_VISIBLE_DEVICES= timeout "${MAIN_S:-90}" $PY examples/japanese_vowels_otk.py ) 2>&1 | tee -a "$OUT/bench.log"
fi
if has suite; then
  echo "== test suite on the GPU" | tee "$OUT/suite.log"
  timeout "${SUITE_S:-270}" $PY -m pytest -q -n "${NPROC:-12}" -p no:cacheprovider --timeout 150 -rfEs \
    --tb=short 2>&1 | tee -a "$OUT/suite.log"
  echo "suite rc ${PIPESTATUS[0]}" | tee -a "$OUT/suite.log"
fi
if has st; then
  for dev in cuda cpu; do
    echo "== Set Transformer epoch on $dev" | tee -a "$OUT/bench.log"
    timeout "${ST_S:-60}" $PY benchmarks/bench_set_transformer_step.py --device $dev --threads 16 \
      --repeats 3 2>&1 | tee -a "$OUT/bench.log"
  done
fi
if has otk; then
  echo "== OTK transform benchmark on the GPU" | tee -a "$OUT/bench.log"
  timeout "${OTK_S:-90}" $PY benchmarks/bench_otk_transform.py --device cuda --threads 8 --repeats 3 \
    --parts 1,3,5 --out "$OUT/otk_transform_cuda.md" 2>&1 | tee -a "$OUT/bench.log"
fi
if has abc; then
  echo "== ABC labels of an instance alone and among others (device=auto)" | tee -a "$OUT/bench.log"
  timeout "${ABC_S:-120}" $PY benchmarks/bench_abc_invariance.py 2>&1 | tee -a "$OUT/bench.log"
fi
if has dk; then
  for dev in gpu cpu; do
    echo "== DilatedKernelFeatures + ridge on $dev (fit + predict)" | tee -a "$OUT/bench.log"
    ( [ $dev = cpu ] && export CUDA_VISIBLE_DEVICES=; cd benchmarks && timeout "${DK_S:-120}" \
      $PY bench_dilated_kernels.py --datasets ACSF1 WatchMagnitude --seeds 0 --rows skset ) 2>&1 \
      | tee -a "$OUT/bench.log"
  done
fi
