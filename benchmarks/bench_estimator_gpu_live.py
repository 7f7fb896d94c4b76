"""The estimator against training steps measured now, on this machine's CUDA card (bench_estimator_gpu reads the
steps recorded on an H200 instead).

benchmarks/gpu_step_peaks.py measures the main set of cases for at most `size` seconds (default 420) into a
temporary file, then bench_estimator_gpu's comparison runs on it: the same figures, from a live card. Needs torch
with CUDA, transformers and peft (bitsandbytes for the QLoRA cases); on a machine without a CUDA device every row
says "not run" and why.
Run: python -m benchmarks run --tag gpu
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import bench_estimator_gpu
from benchmarks.declare import Benchmark, detail, run_alone

ROOT = Path(__file__).resolve().parent.parent
BENCHMARK = Benchmark(
    name="estimator_gpu_live",
    about="The estimator against training steps measured now on this machine's CUDA card (gpu_step_peaks.py, main set)",
    tags=("gpu", "estimator"),
    size="seconds of measuring before no further case starts (default 420)",
    small=60,
    requires=("cuda",),
    timeout_s=1200,
    figures=bench_estimator_gpu.BENCHMARK.figures,
)


def measure(size: int | None = None) -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="hubwatch-gpu-") as tmp:
        out = Path(tmp) / "gpu_step_peaks.json"
        done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "gpu_step_peaks.py"), str(out),
                               "--budget", str(size or 420)], cwd=ROOT, capture_output=True, text=True, check=False)
        detail(done.stdout[-4000:])
        if done.returncode or not out.exists():
            raise SystemExit(f"gpu_step_peaks.py failed ({done.returncode}): {done.stderr[-2000:]}")
        return bench_estimator_gpu.measure(None, [str(out)])


if __name__ == "__main__":
    run_alone(BENCHMARK, measure)
