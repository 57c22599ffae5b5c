# Sourced on a GPU machine by tools/cuda/check.sh and tools/cuda/bench.sh: the CUDA 13
# libraries the binaries link (the system's, else those PyTorch's wheels brought) on
# LD_LIBRARY_PATH, and pip told not to look for an index (no network there).
export PIP_NO_INDEX=1
for lib in libcudart.so.13 libcublas.so.13 libcublasLt.so.13 libcurand.so.10 libnvrtc.so.13; do
    ldconfig -p | grep -q "$lib" && continue
    found=$(find /usr/local /opt /usr/lib -name "$lib" 2>/dev/null | head -1)
    [ -n "$found" ] && export LD_LIBRARY_PATH=$(dirname "$found")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
done
