#!/usr/bin/env python3
"""Generate link-time stub libraries for a CUDA build of rlvmr on a machine without CUDA.

candle's `cuda` feature pulls in cudarc with `dynamic-linking`: the binary is linked against
libcuda, libcublas, libcublasLt, libcurand and libnvrtc. The build machine has no GPU driver and
no CUDA libraries, so this script writes stand-in shared objects that carry the real SONAMEs and
define every function cudarc declares (as empty bodies). They only satisfy the linker; the
binary's NEEDED entries then name the real libraries, which the GPU machine provides at run time.
The stubs are never shipped or loaded.

usage: link_stubs.py CUDARC_SRC_DIR OUT_DIR
"""
import re
import subprocess
import sys
from pathlib import Path

# cudarc module -> (library file name, SONAME of the CUDA 13 library)
LIBRARIES = {
    "driver": ("libcuda.so", "libcuda.so.1"),
    "cublas": ("libcublas.so", "libcublas.so.13"),
    "cublaslt": ("libcublasLt.so", "libcublasLt.so.13"),
    "curand": ("libcurand.so", "libcurand.so.10"),
    "nvrtc": ("libnvrtc.so", "libnvrtc.so.13"),
}

# `extern "C" { fn cuInit(flags: ...) -> CUresult; }` inside cudarc's generated bindings
EXTERN_FN = re.compile(r'extern "C" \{\s*(?:pub )?fn (\w+)\(')


def declared_functions(bindings: Path) -> list[str]:
    return sorted(set(EXTERN_FN.findall(bindings.read_text())))


def write_stub(names: list[str], soname: str, out: Path) -> None:
    source = out.with_suffix(".c")
    source.write_text("".join(f"void {n}(void) {{}}\n" for n in names))
    subprocess.run(
        ["gcc", "-shared", "-fPIC", f"-Wl,-soname,{soname}", str(source), "-o", str(out)],
        check=True,
    )
    source.unlink()


def main() -> int:
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    cudarc, out_dir = Path(sys.argv[1]), Path(sys.argv[2])
    out_dir.mkdir(parents=True, exist_ok=True)
    for module, (file_name, soname) in LIBRARIES.items():
        bindings = cudarc / "src" / module / "sys" / "mod.rs"
        if not bindings.is_file():
            print(f"error: {bindings} not found (is {cudarc} a cudarc source folder?)", file=sys.stderr)
            return 1
        names = declared_functions(bindings)
        if not names:
            print(f"error: no extern functions found in {bindings}", file=sys.stderr)
            return 1
        write_stub(names, soname, out_dir / file_name)
        print(f"{file_name}: {len(names)} symbols, SONAME {soname}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
