"""The seccomp filter, run through a small classic-BPF interpreter written here, against the
numeric tables it replaced; the name tables against the kernel's headers; the assembler."""

from __future__ import annotations

import errno
import re
import struct
from pathlib import Path

import pytest

from rlvr_code.sandbox import SandboxError, seccomp_filter
from rlvr_code.sandbox.syscalls import ARCHES, DENIED, Bpf, arch_table

ALLOW, KILL = 0x7FFF0000, 0x80000000
EACCES, ENOSYS = 0x00050000 | errno.EACCES, 0x00050000 | errno.ENOSYS
CLONE_NAMESPACES = 0x7E020000  # CLONE_NEWNS|NEWCGROUP|NEWUTS|NEWIPC|NEWUSER|NEWPID|NEWNET
AUDIT_ARCH_I386 = 0x40000003

# Copied by hand from sandbox.py at d4e0595 (``_ARCH``), before the filter was built from names.
OLD = {
    "x86_64": {
        "audit_arch": 0xC000003E,
        "pivot_root": 155,
        "clone": 56,
        "sendto": 44,
        "clone3": 435,
        "x32_bit": 0x40000000,
        "denied": (
            41,
            425,
            426,
            427,
            272,
            308,
            165,
            166,
            155,
            161,
            428,
            429,
            430,
            431,
            432,
            433,
            442,
            101,
            310,
            311,
            321,
            298,
            323,
            248,
            249,
            250,
            303,
            304,
            42,
            49,
            46,
            307,
            29,
            30,
            31,
            67,
            64,
            65,
            66,
            220,
            68,
            69,
            70,
            71,
        ),
    },
    "aarch64": {
        "audit_arch": 0xC00000B7,
        "pivot_root": 41,
        "clone": 220,
        "sendto": 206,
        "clone3": 435,
        "x32_bit": None,
        "denied": (
            198,
            425,
            426,
            427,
            97,
            268,
            40,
            39,
            41,
            51,
            428,
            429,
            430,
            431,
            432,
            433,
            442,
            117,
            270,
            271,
            280,
            241,
            282,
            217,
            218,
            219,
            264,
            265,
            203,
            200,
            211,
            269,
            194,
            196,
            195,
            197,
            190,
            193,
            191,
            192,
            186,
            189,
            188,
            187,
        ),
    },
}


def run_filter(code: bytes, nr: int, audit_arch: int, args: tuple[int, ...] = (0,) * 6) -> int:
    """The action the kernel would take: interpret the ``sock_filter`` array on one
    ``struct seccomp_data`` (nr, arch, instruction pointer, six arguments)."""
    data = struct.pack("=IIQ6Q", nr, audit_arch, 0, *args)
    ins = [struct.unpack("HBBI", code[i : i + 8]) for i in range(0, len(code), 8)]
    pc, acc = 0, 0
    while True:
        op, jt, jf, k = ins[pc]
        if op == 0x20:  # BPF_LD | BPF_W | BPF_ABS
            acc = struct.unpack_from("=I", data, k)[0]
            pc += 1
        elif op == 0x15:  # BPF_JMP | BPF_JEQ | BPF_K
            pc += 1 + (jt if acc == k else jf)
        elif op == 0x35:  # BPF_JGE
            pc += 1 + (jt if acc >= k else jf)
        elif op == 0x45:  # BPF_JSET
            pc += 1 + (jt if acc & k else jf)
        elif op == 0x06:  # BPF_RET | BPF_K
            return k
        else:
            raise AssertionError(f"unexpected opcode {op:#x} at {pc}")


def old_action(old: dict, nr: int, args: tuple[int, ...] = (0,) * 6) -> int:
    """What the filter at d4e0595 did with a native call, from its tables and its documented rules."""
    if old["x32_bit"] is not None and nr >= old["x32_bit"]:
        return EACCES
    if nr in old["denied"]:
        return EACCES
    if nr == old["clone3"]:
        return ENOSYS
    if nr == old["clone"]:
        return EACCES if args[0] & CLONE_NAMESPACES else ALLOW
    if nr == old["sendto"]:
        return EACCES if args[4] else ALLOW
    return ALLOW


@pytest.mark.parametrize("arch", ["x86_64", "aarch64"])
def test_the_filter_denies_exactly_what_the_numeric_tables_denied(arch):
    old, code = OLD[arch], seccomp_filter(arch)
    native, clone, sendto = old["audit_arch"], old["clone"], old["sendto"]
    for nr in [*range(1024), 0x3FFFFFFF, 0x40000000, 0x40000000 + 41, 0x7FFFFFFF, 0xFFFFFFFF]:
        assert run_filter(code, nr, native) == old_action(old, nr), nr
    assert {nr for nr in range(1024) if run_filter(code, nr, native) == EACCES} == set(old["denied"])
    flags = [0, 17, 0x003D0F00 | 17, (1 << 32) | 17, (1 << 33) | 0x10000000] + [(1 << b) | 17 for b in range(8, 32)]
    for value in flags:
        args = (value, 0, 0, 0, 0, 0)
        assert run_filter(code, clone, native, args) == old_action(old, clone, args), hex(value)
    for address in (0, 1, 0xFFFFFFFF, 1 << 32, 0x7FFF_0000_1000):
        args = (3, 0, 1, 0, address, 16)
        assert run_filter(code, sendto, native, args) == old_action(old, sendto, args) == (EACCES if address else ALLOW)
    for foreign in (AUDIT_ARCH_I386, *(o["audit_arch"] for a, o in OLD.items() if a != arch)):
        for nr in (0, 1, 20, 39, 41, clone, 0x40000000 + 41):
            assert run_filter(code, nr, foreign) == KILL
    assert arch_table(arch).numbers["pivot_root"] == old["pivot_root"]


def test_the_clone_check_sees_each_namespace_flag():
    code, old = seccomp_filter("x86_64"), OLD["x86_64"]
    for flag in (0x00020000, 0x02000000, 0x04000000, 0x08000000, 0x10000000, 0x20000000, 0x40000000):
        assert run_filter(code, old["clone"], old["audit_arch"], (flag | 17, 0, 0, 0, 0, 0)) == EACCES
    thread = 0x003D0F00  # CLONE_VM|FS|FILES|SIGHAND|THREAD|SYSVSEM|SETTLS|PARENT_SETTID|CHILD_CLEARTID
    assert run_filter(code, old["clone"], old["audit_arch"], (thread, 0, 0, 0, 0, 0)) == ALLOW


HEADERS = {
    "x86_64": ["/usr/include/x86_64-linux-gnu/asm/unistd_64.h", "/usr/include/asm/unistd_64.h"],
    "aarch64": ["/usr/include/asm-generic/unistd.h"],
}


@pytest.mark.parametrize("arch", ["x86_64", "aarch64"])
def test_the_name_tables_match_the_kernel_headers(arch):
    header = next((Path(p) for p in HEADERS[arch] if Path(p).is_file()), None)
    if header is None:
        pytest.skip(f"no kernel header for {arch} here ({HEADERS[arch]})")
    numbers = {m[1]: int(m[2]) for m in re.finditer(r"#define __NR_(\w+)\s+(\d+)\b", header.read_text())}
    table = ARCHES[arch].numbers
    assert {name: numbers.get(name) for name in table} == table


def test_both_tables_name_the_same_calls_and_every_denied_call():
    assert set(ARCHES["x86_64"].numbers) == set(ARCHES["aarch64"].numbers)
    assert set(DENIED) | {"clone", "clone3", "sendto"} == set(ARCHES["x86_64"].numbers)
    assert len(DENIED) == len(set(DENIED)) == 44


def test_an_unknown_architecture_is_a_sandbox_error():
    with pytest.raises(SandboxError, match=r"Unsupported architecture: 'riscv64'. Supported: \['aarch64', 'x86_64'\]"):
        seccomp_filter("riscv64")


def test_the_assembler_resolves_forward_labels():
    p = Bpf()
    p.load(0)
    p.jeq(7, true="yes")
    p.jge(9, false="yes")
    p.ret(ALLOW)
    p.label("yes")
    p.ret(EACCES)
    code = p.assemble()
    assert [struct.unpack("HBBI", code[i : i + 8]) for i in range(0, len(code), 8)] == [
        (0x20, 0, 0, 0),
        (0x15, 2, 0, 7),
        (0x35, 0, 1, 9),
        (0x06, 0, 0, ALLOW),
        (0x06, 0, 0, EACCES),
    ]
    assert run_filter(code, 7, 0) == EACCES and run_filter(code, 8, 0) == EACCES
    assert run_filter(code, 9, 0) == ALLOW


def test_the_assembler_refuses_bad_jumps():
    p = Bpf()
    p.label("top")
    p.jeq(1, true="top")
    with pytest.raises(ValueError, match="cannot jump to 'top'"):
        p.assemble()
    p = Bpf()
    p.jeq(1, true="nowhere")
    p.label("end")
    with pytest.raises(ValueError, match=r"Unknown label: 'nowhere'. Defined: \['end'\]"):
        p.assemble()
    with pytest.raises(ValueError, match="defined twice"):
        p.label("end")
    p = Bpf()
    p.jeq(1, true="far")
    for _ in range(256):
        p.ret(ALLOW)
    p.label("far")
    p.ret(EACCES)
    with pytest.raises(ValueError, match="0-255 instructions forward"):
        p.assemble()
