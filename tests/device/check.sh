#!/usr/bin/env bash
# Every check that needs a GPU, in one run on a lent device machine (the `run` tool), results under $OUT:
#   real NVML (agent), the op backends (kernels), the 1b bf16 MFU benchmark, the quantized kernels and the
#   quantization speed benchmark on CUDA. Each step has its own timeout so one hang cannot eat the lease;
#   the whole script stays well inside one 10-minute command.
set -u
out=${OUT:-device-results}
mkdir -p "$out"
py=${PYTHON:-python3}
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
step() {  # name seconds command...
    local name=$1 secs=$2
    shift 2
    echo "== $name"
    timeout "$secs" "$@" >"$out/$name.log" 2>&1
    echo "== $name rc $?"
    tail -n 25 "$out/$name.log"
}
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv | tee "$out/nvidia-smi.txt"
step real_gpu_check 90 "$py" -m myolo.agent.gpu.real_gpu_check
step ops_gpu_check 150 "$py" -m myolo.kernels.ops.gpu_check --out "$out/ops_gpu_check.json"
step mfu 200 "$py" tests/benchmarks/bench_mfu.py
cp tests/benchmarks/results/mfu.json "$out/" 2>/dev/null
step quant_gpu_check 60 "$py" -m myolo.kernels.quantization.gpu_check --out "$out/quant_gpu_check.json"
step quant_bench 90 "$py" tests/benchmarks/bench_quant.py --device cuda --skip-quality --runs 3
cp tests/benchmarks/results/quant.json "$out/" 2>/dev/null
exit 0
