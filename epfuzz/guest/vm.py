"""A small QEMU guest with Debian's kernel (which has rdma_rxe), rdma-core and python3-pyverbs.

This machine's kernel has no RDMA; the verbs backend runs inside this guest. It is
built from Debian packages only (docs/backends.md, "The verbs backend and its guest"):
the kernel with `apt-get download` + `dpkg -x`, the root file system with
mmdebstrap, kernel modules pruned to what soft-RoCE, tc and 9p need, everything
packed into one uncompressed initramfs. The project is not baked in: the work
tree is shared read-only over 9p, so the image is keyed by package versions only
and rebuilt when they change. QEMU runs under TCG (KVM is PVM here and aborts);
every step has a timeout and QEMU is killed by its own PID on every exit path.

    epfuzz vm build            # or make rxe-vm
    epfuzz vm run -- CMD...    # run CMD in the guest (cwd: the project), exit code comes back
    epfuzz vm shell            # interactive console
"""

from __future__ import annotations

import base64
import hashlib
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path

from epfuzz.guest import vm_tree
from epfuzz.infra.errors import EpfuzzError

PACKAGE = Path(__file__).resolve().parent.parent
CACHE = Path(os.environ.get("EPFUZZ_VM_CACHE", Path.home() / ".cache" / "epfuzz" / "vm"))
SUITE = "bookworm"
PACKAGES = ("mount", "kmod", "iproute2", "procps", "rdma-core", "ibverbs-providers", "ibverbs-utils", "python3",
            "python3-pyverbs", "python3-numpy", "python3-structlog", "python3-pytest", "libstdc++6")
#: wheels Debian does not package, fetched on the host from PyPI for the guest's Python 3.11
GUEST_WHEELS = ("atheris==3.0.0",)
#: module subtrees copied into the guest (depmod resolves the rest inside it)
MODULE_TREES = ("drivers/infiniband/core", "drivers/infiniband/sw/rxe", "net/sched", "net/9p", "fs/9p", "fs/netfs",
                "fs/fscache", "crypto", "lib",
                "drivers/net/veth.ko", "drivers/net/dummy.ko", "drivers/net/virtio_net.ko",
                "drivers/net/net_failover.ko", "net/core/failover.ko", "drivers/virtio", "net/ipv6",
                "net/ipv4/udp_tunnel.ko")
EXIT_MARK = "EPFUZZ-GUEST-EXIT"
INIT_MARK = "epfuzz-guest: init"            # the guest's init runs: the kernel has booted
RUNNING_MARK = "epfuzz-guest: running"      # the command starts: its output follows
ANSI = re.compile(r"\x1b(\[[0-9;?]*[A-Za-z]|[c()][0-9A-Za-z]?)")
BOOT_TIMEOUT = 120


class VmError(EpfuzzError):
    """The guest could not be built or booted; the message carries the last console lines."""


INIT = r"""#!/bin/sh
echo "epfuzz-guest: init"
export PATH=/usr/sbin:/usr/bin:/sbin:/bin
mount -t proc proc /proc; mount -t sysfs sys /sys; mount -t devtmpfs dev /dev 2>/dev/null
mkdir -p /dev/pts /tmp /mnt/epfuzz; mount -t devpts devpts /dev/pts; mount -t tmpfs tmp /tmp
echo 1 > /proc/sys/kernel/sysrq
for m in virtio_pci virtio_net 9pnet_virtio 9p rdma_rxe ib_uverbs sch_netem sch_tbf sch_prio cls_u32 veth; do
  modprobe $m 2>/dev/null
done
mount -t 9p -o trans=virtio,version=9p2000.L,ro epfuzz /mnt/epfuzz || echo "epfuzz-guest: 9p mount failed"
mkdir -p /mnt/out /mnt/cmd; mount -t 9p -o trans=virtio,version=9p2000.L out /mnt/out 2>/dev/null
mount -t 9p -o trans=virtio,version=9p2000.L,ro cmd /mnt/cmd 2>/dev/null
ip link set lo up
if [ -f /mnt/cmd/command ]; then cmd="sh /mnt/cmd/command"
else cmd=$(sed -n 's/.*epfuzz.cmd=\([^ ]*\).*/\1/p' /proc/cmdline | base64 -d); fi
cd /mnt/epfuzz
export PYTHONPATH=/mnt/epfuzz PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 HOME=/tmp EPFUZZ_IN_GUEST=1
if [ "$cmd" = "shell" ]; then setsid sh -c 'exec sh </dev/ttyS0 >/dev/ttyS0 2>&1'; rc=0
else sh -c "$cmd"; rc=$?; fi
echo "EPFUZZ-GUEST-EXIT $rc"
sync; echo o > /proc/sysrq-trigger; sleep 5
"""

def _run(cmd: list[str], timeout: int, **kw: object) -> subprocess.CompletedProcess[str]:
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, **kw)  # type: ignore[call-overload]
    except FileNotFoundError:
        raise VmError(f"{cmd[0]} is not installed (apt-get install qemu-system-x86 mmdebstrap cpio)") from None
    except subprocess.TimeoutExpired:
        raise VmError(f"{' '.join(cmd[:3])}... timed out after {timeout} s") from None
    if p.returncode != 0:
        tail = (p.stderr or p.stdout).strip().splitlines()[-3:]
        raise VmError(f"{' '.join(cmd[:3])}... failed: {' | '.join(tail)}")
    return p


def _candidate(pkg: str) -> str:
    out = _run(["apt-cache", "policy", pkg], 60).stdout
    m = re.search(r"Candidate:\s*(\S+)", out)
    if not m or m.group(1) == "(none)":
        raise VmError(f"Debian package {pkg} is not available (run apt-get update)")
    return m.group(1)


def _kernel_package() -> str:
    out = _run(["apt-cache", "depends", "linux-image-amd64"], 60).stdout
    m = re.search(r"Depends:\s*(linux-image-\S+-amd64)", out)
    if not m:
        raise VmError("cannot resolve linux-image-amd64 to a kernel package")
    return m.group(1)


def _mirror() -> str:
    """The machine's own Debian mirror (never a host name written into the project)."""
    for f in sorted(Path("/etc/apt/sources.list.d").glob("*.sources")):
        m = re.search(r"^URIs:\s*(\S+)", f.read_text(), re.M)
        if m and "security" not in m.group(1):
            return m.group(1)
    lst = Path("/etc/apt/sources.list")
    if lst.exists():
        m = re.search(r"^deb\s+(\S+)\s+", lst.read_text(), re.M)
        if m:
            return m.group(1)
    raise VmError("no Debian mirror in this machine's apt configuration")


def image_key() -> tuple[str, str]:
    kpkg = _kernel_package()
    versions = [f"{kpkg}={_candidate(kpkg)}"] + [f"{p}={_candidate(p)}" for p in PACKAGES]
    return hashlib.sha1("\n".join([SUITE, INIT, *versions, *MODULE_TREES]).encode()).hexdigest()[:16], kpkg


def build(force: bool = False, log: bool = True) -> Path:
    """Build (or reuse) the guest image; returns its folder (vmlinuz, rootfs.cpio)."""
    key, kpkg = image_key()
    out = CACHE / key
    if not force and (out / "vmlinuz").exists() and (out / "rootfs.cpio").exists():
        return out
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="epfuzz-vm-") as tmp:
        t = Path(tmp)
        _run(["apt-get", "download", kpkg], 600, cwd=t)
        deb = next(t.glob("linux-image-*.deb"))
        kroot = t / "kernel"
        _run(["dpkg", "-x", str(deb), str(kroot)], 600)
        vmlinuz = next((kroot / "boot").glob("vmlinuz-*"))
        kver = vmlinuz.name.removeprefix("vmlinuz-")
        rootfs = t / "rootfs"
        _run(["mmdebstrap", "--variant=essential", "--include=" + ",".join(PACKAGES), SUITE, str(rootfs),
              f"deb {_mirror()} {SUITE} main"], 1200)
        src, dst = kroot / "lib/modules" / kver, rootfs / "lib/modules" / kver
        dst.mkdir(parents=True, exist_ok=True)
        for name in ("modules.order", "modules.builtin", "modules.builtin.modinfo"):
            if (src / name).exists():
                shutil.copy2(src / name, dst / name)
        for tree in MODULE_TREES:
            s = src / "kernel" / tree
            d = dst / "kernel" / tree
            if s.is_dir():
                shutil.copytree(s, d, dirs_exist_ok=True)
            elif s.exists():
                d.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(s, d)
        _run(["chroot", str(rootfs), "depmod", kver], 300)
        wheels = t / "wheels"
        _run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:", "--python-version",
              "3.11", "--implementation", "cp", "--platform", "manylinux2014_x86_64", "--platform",
              "manylinux_2_17_x86_64", "-d", str(wheels), *GUEST_WHEELS], 600)
        site = rootfs / "usr/lib/python3/dist-packages"
        for whl in wheels.glob("*.whl"):
            shutil.unpack_archive(str(whl), str(site), "zip")
        for junk in ("usr/share/doc", "usr/share/man", "usr/share/locale", "usr/share/info", "var/cache/apt",
                     "var/lib/apt/lists"):
            shutil.rmtree(rootfs / junk, ignore_errors=True)
        (rootfs / "init.sh").write_text(INIT)
        (rootfs / "init.sh").chmod(0o755)
        out.mkdir(parents=True, exist_ok=True)
        shutil.copy2(vmlinuz, out / "vmlinuz.tmp")
        with open(out / "rootfs.cpio.tmp", "wb") as f:
            files = subprocess.run(["find", "."], cwd=rootfs, capture_output=True, check=True).stdout
            subprocess.run(["cpio", "-o", "-H", "newc", "--quiet"], cwd=rootfs, input=files, stdout=f, check=True)
        os.replace(out / "vmlinuz.tmp", out / "vmlinuz")
        os.replace(out / "rootfs.cpio.tmp", out / "rootfs.cpio")
    for old in CACHE.iterdir():  # images of older package versions are never used again
        if old.is_dir() and old.name != key:
            shutil.rmtree(old, ignore_errors=True)
    if log:
        print(f"epfuzz vm: built {out} in {time.monotonic() - t0:.0f} s", file=sys.stderr)
    return out


def _qemu_argv(img: Path, memory_mb: int, append: str, shares: dict[str, tuple[Path, bool]],
               tree: Path) -> list[str]:
    """QEMU under TCG with the project (`tree`, from vm_tree.stage) and each folder of `shares` (tag ->
    (path, read-only)) over 9p."""
    argv = ["qemu-system-x86_64", "-accel", "tcg,tb-size=256", "-cpu", "max", "-smp", "2", "-m", str(memory_mb),
            "-kernel", str(img / "vmlinuz"), "-initrd", str(img / "rootfs.cpio"), "-append", append,
            "-nographic", "-no-reboot", "-nic", "user,model=virtio-net-pci,restrict=on"]
    for tag, (path, readonly) in {"epfuzz": (tree, True), **shares}.items():
        argv += ["-fsdev", f"local,id={tag},path={path.resolve()},security_model=none" + (",readonly=on" * readonly),
                 "-device", f"virtio-9p-pci,fsdev={tag},mount_tag={tag}"]
    return argv


Echo = Callable[[str], None]


def echo_until(stop: Callable[[str], bool], rename: tuple[str, str] = ("", "")) -> Echo:
    """A console echo to stderr, each line with `rename[0]` written as `rename[1]`, that ends at the
    first line `stop` picks: a guest campaign's own summary names guest paths and the guest's
    interpreter in its replay lines, so the host prints its own summary instead."""
    done = False

    def echo(line: str) -> None:
        nonlocal done
        done = done or stop(line)
        if not done:
            sys.stderr.write((line.replace(*rename) if rename[0] else line) + "\n")
            sys.stderr.flush()
    return echo


def run(command: str, timeout: int = 600, stream: bool | Echo = True, memory_mb: int = 1536,
        out_dir: Path | None = None, files: dict[str, bytes] | None = None) -> tuple[int, list[str]]:
    """Boot the guest, run `command` (sh) in the project folder, power off; (exit code, console lines).

    The command runs in a copy of the project in the guest's tmpfs (/tmp/epfuzz, packed per run:
    a code change needs no rebuild); the work tree itself is also shared read-only at /mnt/epfuzz,
    and `out_dir`, if given, read-write at /mnt/out.
    The command and `files` (name -> bytes) go in through a read-only share at /mnt/cmd, so their
    size is not bounded by the kernel command line (2,048 bytes, where a longer one never boots).
    """
    img = build(log=bool(stream))
    if shutil.which("qemu-system-x86_64") is None:
        raise VmError("qemu-system-x86_64 is not installed (apt-get install qemu-system-x86)")
    with tempfile.TemporaryDirectory(prefix="epfuzz-cmd-") as tmp, \
            tempfile.TemporaryDirectory(prefix="epfuzz-tree-") as scratch:
        cmd_dir = Path(tmp)
        tree = vm_tree.stage(PACKAGE, Path(scratch))
        # the kernel boots `quiet`, so nothing marks where the command's output starts: the command does.
        # The project goes in as one tar, unpacked into tmpfs (vm_tree: 9p round trips are slow here)
        (cmd_dir / "tree.tar").write_bytes(vm_tree.pack(tree))
        (cmd_dir / "command").write_text(vm_tree.prologue("/mnt/cmd/tree.tar") + f"echo '{RUNNING_MARK}'\n{command}\n")
        for name, data in (files or {}).items():
            (cmd_dir / name).write_bytes(data)
        shares = {"cmd": (cmd_dir, True)}
        if out_dir is not None:
            out_dir.mkdir(parents=True, exist_ok=True)
            shares["out"] = (out_dir, False)
        argv = _qemu_argv(img, memory_mb, "console=ttyS0 rdinit=/init.sh panic=-1 quiet", shares, tree)
        return _console(argv, timeout, stream)


def _console(argv: list[str], timeout: float, stream: bool | Echo) -> tuple[int, list[str]]:
    """Run QEMU and follow its console to the guest's exit mark; QEMU is killed on every exit path.

    Two clocks: the guest must reach its init within BOOT_TIMEOUT (the BIOS prints lines before the
    kernel runs, so a console that is not silent is no sign of a boot), and the command must end
    within `timeout`."""
    lines: deque[str] = deque(maxlen=4000)
    echo = stream if callable(stream) else (lambda line: print(line, flush=True)) if stream else None
    rc: int | None = None
    booted = started = False
    start = time.monotonic()
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            start_new_session=True)

    def _term(signum: int, frame: object) -> None:  # SIGTERM must not orphan QEMU: unwind to finally
        raise KeyboardInterrupt

    old_term = signal.signal(signal.SIGTERM, _term) if threading.current_thread() is threading.main_thread() else None
    try:
        assert proc.stdout is not None
        fd = proc.stdout.fileno()
        os.set_blocking(fd, False)
        buf = ""
        while rc is None:
            try:
                chunk = os.read(fd, 65536).decode(errors="replace")
            except BlockingIOError:
                chunk = ""
            if chunk:
                buf += chunk
                *done, buf = buf.split("\n")
                for line in done:
                    line = ANSI.sub("", line).rstrip("\r")
                    lines.append(line)
                    if line.startswith(EXIT_MARK):
                        rc = int(line.split()[1])
                    elif echo and started:
                        echo(line)
                    booted = booted or INIT_MARK in line or "Run /init.sh" in line
                    started = started or RUNNING_MARK in line
            elif proc.poll() is not None:
                break
            else:
                time.sleep(0.05)
            now = time.monotonic() - start
            if not booted and now > BOOT_TIMEOUT:
                raise VmError(f"guest did not boot in {BOOT_TIMEOUT} s: the kernel never reached the guest's init; "
                              "last console lines: " + " | ".join(list(lines)[-5:]))
            if rc is None and now > timeout:
                raise VmError(f"guest command timed out after {timeout} s; last console lines: "
                              + " | ".join(list(lines)[-5:]))
        if rc is None:
            raise VmError("guest stopped without an exit code; last console lines: " + " | ".join(list(lines)[-8:]))
        return rc, list(lines)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        if old_term is not None:
            signal.signal(signal.SIGTERM, old_term)


def main(argv: list[str]) -> int:
    if not argv or argv[0] not in ("build", "run", "shell"):
        print("usage: epfuzz vm build [--force] | run -- CMD... | shell", file=sys.stderr)
        return 2
    if argv[0] == "build":
        print(build(force="--force" in argv))
        return 0
    for tool in ("qemu-system-x86_64",):
        if shutil.which(tool) is None:
            raise VmError(f"{tool} is not installed (apt-get install qemu-system-x86 mmdebstrap cpio)")
    if argv[0] == "shell":
        append = "console=ttyS0 rdinit=/init.sh panic=-1 epfuzz.cmd=" + base64.b64encode(b"shell").decode()
        # exec replaces this process, so a staged copy (installed package) stays in /tmp after the shell
        tree = vm_tree.stage(PACKAGE, Path(tempfile.mkdtemp(prefix="epfuzz-tree-")))
        qemu = _qemu_argv(build(), 1024, append, {}, tree)
        os.execvp(qemu[0], qemu)
    rest = argv[1:]
    if rest and rest[0] == "--":
        rest = rest[1:]
    rc, _ = run(shlex.join(rest) if rest else "true")
    return rc
