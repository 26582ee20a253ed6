"""Compile the op interpreter's kernels with NVRTC to PTX, on a machine without a GPU.

The interpreter's source (`cuda_prog.kernel_source()`) is otherwise compiled only where it runs, by
CuPy's NVRTC on the GPU machine, so a kernel that does not build would first show as lost device time.
NVRTC needs no driver and no GPU: PyPI's `nvidia-cuda-nvrtc-cu12` wheel (a test dependency, the dev
extra) is enough. The options are CuPy's for `cupy.RawModule(code=..., options=("-std=c++17",))`: its
own `-arch=compute_XY` for the device, plus the ones given.

    python bench/cuda_nvrtc.py                  # compute_90, compute_80 (PTX: bulk ops used), sm_90, sm_80
    python bench/cuda_nvrtc.py --arch compute_90 --ptx out.ptx
"""

from __future__ import annotations

import argparse
import ctypes
import glob
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

#: what CuPy passes besides its -arch (cuda_interp._functions)
OPTIONS = ("-std=c++17",)
#: the instructions of a TMA Write and a ProxyFence (cuda_interp.cu: tma_store, tma_stage_fence,
#: tma_wait_read_but_one, proxy_fence)
TMA_PTX = ("cp.async.bulk.global.shared::cta.bulk_group", "cp.async.bulk.commit_group",
           "cp.async.bulk.wait_group.read 1", "cp.async.bulk.wait_group 0", "fence.proxy.async.shared::cta",
           "fence.proxy.async;")


class NvrtcError(RuntimeError):
    pass


def _candidates() -> list[str]:
    out = []
    for p in sys.path:  # the PyPI wheel: site-packages/nvidia/cuda_nvrtc/lib/libnvrtc.so.12
        out += sorted(glob.glob(os.path.join(p, "nvidia", "cuda_nvrtc", "lib", "libnvrtc.so*")))
    cuda = os.environ.get("CUDA_HOME", "/usr/local/cuda")
    out += sorted(glob.glob(os.path.join(cuda, "lib64", "libnvrtc.so*")))
    return out + ["libnvrtc.so.12", "libnvrtc.so"]


def load() -> ctypes.CDLL | None:
    """libnvrtc, from the PyPI wheel, CUDA_HOME or the loader's path; None where there is none."""
    for name in _candidates():
        if "builtins" in name or ".alt." in name:
            continue
        try:
            return ctypes.CDLL(name)
        except OSError:
            continue
    return None


def compile_ptx(source: str, arch: str, options: tuple[str, ...] = OPTIONS, lib: ctypes.CDLL | None = None) -> str:
    """`source` to PTX for `arch` = compute_XY (what CuPy's NVRTC makes); for sm_XY NVRTC also assembles it
    (ptxas: invalid operands of an inline asm show only there) and a one-line note replaces the PTX.
    NvrtcError with NVRTC's log when it does not compile."""
    lib = lib or load()
    if lib is None:
        raise NvrtcError("libnvrtc not found (pip install nvidia-cuda-nvrtc-cu12)")
    prog = ctypes.c_void_p()
    rc = lib.nvrtcCreateProgram(ctypes.byref(prog), source.encode(), b"cuda_interp.cu", 0, None, None)
    if rc:
        raise NvrtcError(f"nvrtcCreateProgram failed ({rc})")
    try:
        opts = [f"-arch={arch}".encode(), *(o.encode() for o in options)]
        argv = (ctypes.c_char_p * len(opts))(*opts)
        rc = lib.nvrtcCompileProgram(prog, len(opts), argv)
        n = ctypes.c_size_t()
        lib.nvrtcGetProgramLogSize(prog, ctypes.byref(n))
        log = ctypes.create_string_buffer(n.value)
        lib.nvrtcGetProgramLog(prog, log)
        if rc:
            raise NvrtcError(f"{arch}: does not compile:\n{log.value.decode(errors='replace')}")
        if arch.startswith("sm_"):  # NVRTC assembled it (ptxas inside): the machine code's size
            lib.nvrtcGetCUBINSize(prog, ctypes.byref(n))
            return f"<cubin of {n.value:,} bytes>"
        lib.nvrtcGetPTXSize(prog, ctypes.byref(n))
        ptx = ctypes.create_string_buffer(n.value)
        lib.nvrtcGetPTX(prog, ptx)
        return ptx.value.decode()
    finally:
        lib.nvrtcDestroyProgram(ctypes.byref(prog))


def version(lib: ctypes.CDLL) -> str:
    major, minor = ctypes.c_int(), ctypes.c_int()
    lib.nvrtcVersion(ctypes.byref(major), ctypes.byref(minor))
    return f"{major.value}.{minor.value}"


def main(argv: list[str] | None = None) -> int:
    from epfuzz.backends.cuda_prog import kernel_source
    from epfuzz.cases.corpus import write_atomic

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--arch", action="append",
                    help="compute_XY or sm_XY (default: compute_90, compute_80, sm_90, sm_80)")
    ap.add_argument("--ptx", type=Path, help="write the (last) PTX here")
    a = ap.parse_args(argv)
    lib = load()
    if lib is None:
        print("cuda_nvrtc: libnvrtc not found (pip install nvidia-cuda-nvrtc-cu12)", file=sys.stderr)
        return 2
    print(f"NVRTC {version(lib)}")
    for arch in a.arch or ["compute_90", "compute_80", "sm_90", "sm_80"]:
        try:
            ptx = compile_ptx(kernel_source(), arch, lib=lib)
        except NvrtcError as e:
            print(f"cuda_nvrtc: {e}", file=sys.stderr)
            return 1
        if arch.startswith("sm_"):
            print(f"{arch}: ok, {ptx[1:-1]}")
            continue
        used = [op for op in TMA_PTX if op in ptx]
        print(f"{arch}: ok, {len(ptx):,} bytes of PTX; bulk-copy/proxy instructions: {', '.join(used) or 'none'}")
        if a.ptx:
            write_atomic(a.ptx, ptx.encode())
    return 0


if __name__ == "__main__":
    sys.exit(main())
