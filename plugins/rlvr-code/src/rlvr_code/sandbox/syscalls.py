"""System call numbers by name, and the seccomp filter built from those names.

The numbers are the kernel's (``arch/x86/entry/syscalls/syscall_64.tbl`` for x86_64,
``include/uapi/asm-generic/unistd.h`` for aarch64); only the calls the sandbox names are
listed. A table rather than libseccomp: the official bindings are not on PyPI, and every
wrapper needs ``libseccomp.so`` on the host, a dependency for about sixty instructions.
"""

from __future__ import annotations

import ctypes
import errno
import functools
import platform
import struct
from dataclasses import dataclass

from .libc import PR_SET_NO_NEW_PRIVS, PR_SET_SECCOMP, check, libc, prctl
from .records import SandboxError

X86_64 = {
    "clone": 56,
    "clone3": 435,
    "sendto": 44,
    "socket": 41,
    "connect": 42,
    "bind": 49,
    "sendmsg": 46,
    "sendmmsg": 307,
    "io_uring_setup": 425,
    "io_uring_enter": 426,
    "io_uring_register": 427,
    "unshare": 272,
    "setns": 308,
    "mount": 165,
    "umount2": 166,
    "pivot_root": 155,
    "chroot": 161,
    "open_tree": 428,
    "move_mount": 429,
    "fsopen": 430,
    "fsconfig": 431,
    "fsmount": 432,
    "fspick": 433,
    "mount_setattr": 442,
    "ptrace": 101,
    "process_vm_readv": 310,
    "process_vm_writev": 311,
    "bpf": 321,
    "perf_event_open": 298,
    "userfaultfd": 323,
    "add_key": 248,
    "request_key": 249,
    "keyctl": 250,
    "name_to_handle_at": 303,
    "open_by_handle_at": 304,
    "shmget": 29,
    "shmat": 30,
    "shmctl": 31,
    "shmdt": 67,
    "semget": 64,
    "semop": 65,
    "semctl": 66,
    "semtimedop": 220,
    "msgget": 68,
    "msgsnd": 69,
    "msgrcv": 70,
    "msgctl": 71,
}

AARCH64 = {
    "clone": 220,
    "clone3": 435,
    "sendto": 206,
    "socket": 198,
    "connect": 203,
    "bind": 200,
    "sendmsg": 211,
    "sendmmsg": 269,
    "io_uring_setup": 425,
    "io_uring_enter": 426,
    "io_uring_register": 427,
    "unshare": 97,
    "setns": 268,
    "mount": 40,
    "umount2": 39,
    "pivot_root": 41,
    "chroot": 51,
    "open_tree": 428,
    "move_mount": 429,
    "fsopen": 430,
    "fsconfig": 431,
    "fsmount": 432,
    "fspick": 433,
    "mount_setattr": 442,
    "ptrace": 117,
    "process_vm_readv": 270,
    "process_vm_writev": 271,
    "bpf": 280,
    "perf_event_open": 241,
    "userfaultfd": 282,
    "add_key": 217,
    "request_key": 218,
    "keyctl": 219,
    "name_to_handle_at": 264,
    "open_by_handle_at": 265,
    "shmget": 194,
    "shmat": 196,
    "shmctl": 195,
    "shmdt": 197,
    "semget": 190,
    "semop": 193,
    "semctl": 191,
    "semtimedop": 192,
    "msgget": 186,
    "msgsnd": 189,
    "msgrcv": 188,
    "msgctl": 187,
}


@dataclass(frozen=True)
class Arch:
    """One architecture's system call ABI, as seccomp sees it."""

    audit_arch: int  # seccomp_data.arch of a native call (AUDIT_ARCH_*)
    numbers: dict[str, int]  # name -> number
    x32_bit: int | None = None  # set in the number of an x32-ABI call (x86_64)


ARCHES = {
    "x86_64": Arch(0xC000003E, X86_64, x32_bit=0x40000000),
    "aarch64": Arch(0xC00000B7, AARCH64),
}

DENIED = (  # fail with EACCES
    "socket",  # every address family: neither ctypes nor _socket can open one
    "io_uring_setup",
    "io_uring_enter",
    "io_uring_register",  # io_uring can open sockets
    "unshare",
    "setns",
    "mount",
    "umount2",
    "pivot_root",
    "chroot",
    "open_tree",
    "move_mount",
    "fsopen",
    "fsconfig",
    "fsmount",
    "fspick",
    "mount_setattr",
    "ptrace",
    "process_vm_readv",
    "process_vm_writev",
    "bpf",
    "perf_event_open",
    "userfaultfd",
    "add_key",
    "request_key",
    "keyctl",
    "name_to_handle_at",
    "open_by_handle_at",
    "connect",
    "bind",
    "sendmsg",
    "sendmmsg",  # a socketpair's socket could reach a host Unix socket by address
    "shmget",
    "shmat",
    "shmctl",
    "shmdt",  # SysV IPC: segments outside RLIMIT_AS that outlive the process
    "semget",
    "semop",
    "semctl",
    "semtimedop",
    "msgget",
    "msgsnd",
    "msgrcv",
    "msgctl",
)

CLONE_NEWNS, CLONE_NEWCGROUP, CLONE_NEWUTS, CLONE_NEWIPC = 0x00020000, 0x02000000, 0x04000000, 0x08000000
CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET = 0x10000000, 0x20000000, 0x40000000
CLONE_NAMESPACES = (
    CLONE_NEWNS | CLONE_NEWCGROUP | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNET
)

# struct seccomp_data: nr (u32), arch (u32), instruction_pointer (u64), args (u64[6])
NR, AUDIT_ARCH = 0, 4
ALLOW, KILL, ERRNO = 0x7FFF0000, 0x80000000, 0x00050000  # SECCOMP_RET_ALLOW, _KILL_PROCESS, _ERRNO
_SECCOMP_MODE_FILTER = 2


def arg_low(i: int) -> int:
    """Offset of the low 32 bits of argument ``i`` (little-endian)."""
    return 16 + 8 * i


def arg_high(i: int) -> int:
    return 20 + 8 * i


def arch_table(name: str | None = None) -> Arch:
    """The table of ``name`` (default: this machine's)."""
    name = name or platform.machine()
    if name not in ARCHES:
        raise SandboxError(f"Unsupported architecture: {name!r}. Supported: {sorted(ARCHES)}")
    return ARCHES[name]


class Bpf:
    """A classic BPF program written like assembly: instructions in order, jumps to named
    labels, resolved by :meth:`assemble` (forward only, at most 255 ahead, as the kernel
    requires). Conditional jumps fall through when a branch names no label."""

    LD_W_ABS, JEQ, JGE, JSET, RET = 0x20, 0x15, 0x35, 0x45, 0x06

    def __init__(self) -> None:
        self.code: list[tuple[int, str | None, str | None, int]] = []
        self.labels: dict[str, int] = {}

    def label(self, name: str) -> None:
        if name in self.labels:
            raise ValueError(f"label {name!r} defined twice")
        self.labels[name] = len(self.code)

    def load(self, offset: int) -> None:
        """Load the 32-bit word at ``offset`` of ``struct seccomp_data``."""
        self.code.append((self.LD_W_ABS, None, None, offset))

    def jeq(self, k: int, true: str | None = None, false: str | None = None) -> None:
        self.code.append((self.JEQ, true, false, k))

    def jge(self, k: int, true: str | None = None, false: str | None = None) -> None:
        self.code.append((self.JGE, true, false, k))

    def jset(self, k: int, true: str | None = None, false: str | None = None) -> None:
        """Jump to ``true`` when the loaded word has any bit of ``k`` set."""
        self.code.append((self.JSET, true, false, k))

    def ret(self, action: int) -> None:
        self.code.append((self.RET, None, None, action))

    def assemble(self) -> bytes:
        """The ``struct sock_filter`` array."""
        return b"".join(
            struct.pack("HBBI", op, self._skip(at, jt), self._skip(at, jf), k)
            for at, (op, jt, jf, k) in enumerate(self.code)
        )

    def _skip(self, at: int, label: str | None) -> int:
        if label is None:
            return 0
        if label not in self.labels:
            raise ValueError(f"Unknown label: {label!r}. Defined: {sorted(self.labels)}")
        skip = self.labels[label] - at - 1
        if not 0 <= skip <= 255:
            raise ValueError(
                f"instruction {at} cannot jump to {label!r} at {self.labels[label]}: "
                "BPF jumps go 0-255 instructions forward"
            )
        return skip


@functools.cache
def seccomp_filter(arch: str | None = None) -> bytes:
    """The BPF program (``struct sock_filter`` array) for ``arch`` (default: this machine's).

    Kill the process for a system call of a foreign ABI; EACCES for every call in
    :data:`DENIED` (sockets, io_uring, namespaces and mounts, ptrace, bpf, keyrings,
    connect/bind/sendmsg, SysV IPC, ...), for x32 calls, for ``clone`` with any namespace flag
    and for ``sendto`` with a destination address; ENOSYS for ``clone3`` (its flags sit behind
    a pointer, so libc falls back to ``clone``); allow the rest.
    """
    table = arch_table(arch)
    nr = table.numbers
    p = Bpf()
    p.load(AUDIT_ARCH)
    p.jeq(table.audit_arch, true="native")
    p.ret(KILL)
    p.label("native")
    p.load(NR)
    if table.x32_bit is not None:
        p.jge(table.x32_bit, true="eacces")
    for name in DENIED:
        p.jeq(nr[name], true="eacces")
    p.jeq(nr["clone3"], true="enosys")
    p.jeq(nr["clone"], true="clone")
    p.jeq(nr["sendto"], true="sendto")
    p.ret(ALLOW)

    p.label("clone")  # the low 32 bits of the flags argument hold every CLONE_NEW* flag
    p.load(arg_low(0))
    p.jset(CLONE_NAMESPACES, true="eacces")
    p.ret(ALLOW)

    p.label("sendto")  # a destination address (args[4]) that is not NULL names a host socket
    p.load(arg_low(4))
    p.jeq(0, false="eacces")
    p.load(arg_high(4))
    p.jeq(0, false="eacces")
    p.ret(ALLOW)

    p.label("eacces")
    p.ret(ERRNO | errno.EACCES)
    p.label("enosys")
    p.ret(ERRNO | errno.ENOSYS)
    return p.assemble()


def install_seccomp() -> None:
    """``PR_SET_NO_NEW_PRIVS`` and this machine's :func:`seccomp_filter`, for this process
    and everything it starts."""
    code = seccomp_filter()
    buf = ctypes.create_string_buffer(code)
    fprog = struct.pack("HxxxxxxP", len(code) // 8, ctypes.addressof(buf))
    fbuf = ctypes.create_string_buffer(fprog)
    prctl(PR_SET_NO_NEW_PRIVS, 1, "prctl(PR_SET_NO_NEW_PRIVS)")
    check(libc().prctl(PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.addressof(fbuf), 0, 0), "prctl(PR_SET_SECCOMP)")
