"""The sandbox against hostile programs: each is denied or fails, the host is unaffected,
nothing of the program survives. Run in both isolation modes unless a gap is documented."""

from __future__ import annotations

import errno
import os
import resource
import secrets
import signal
import socket
import textwrap
import time

import pytest
from code_helpers import group_gone, host_can_fork, survivors

from rlvr_code.sandbox import Limits, SandboxError, run_python

FAST = Limits(time_s=10.0)


def run(source, isolation, limits=FAST, **kwargs):
    mode, python = isolation
    return run_python(textwrap.dedent(source), isolation=mode, interpreter=python, limits=limits, **kwargs)


def assert_clean(result, token=None):
    assert group_gone(result.pgid), f"process group {result.pgid} still has members"
    if token is not None:
        assert survivors(token, wait_s=2.0) == []
    assert host_can_fork()


def test_trivial_program_reads_stdin_and_writes_stdout(isolation):
    result = run("import sys; print(sys.stdin.read().strip()[::-1])", isolation, stdin="abc\n")
    assert result.ok and result.stdout == b"cba\n" and result.isolation == isolation[0]
    assert_clean(result)


def test_dev_stdin_and_fd_0_read_the_input(isolation):
    result = run("print(open('/dev/stdin').read().split(), open(0).read().split())", isolation, stdin="4 5\n")
    assert result.ok and result.stdout == b"['4', '5'] ['4', '5']\n"


def test_dev_stdout_and_dev_stderr_write_the_output(isolation):
    result = run(
        "import sys\nprint('a', flush=True)\nopen('/dev/stderr', 'w').write('e')\n"
        "open('/dev/stdout', 'a').write('b\\n')",
        isolation,
    )
    assert result.ok and result.stdout == b"a\nb\n" and result.stderr == b"e"


def test_signal_state_of_the_caller_is_not_inherited(isolation):
    old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR1, signal.SIGTERM})
    try:
        result = run(
            """
            import signal
            print(sorted(int(s) for s in signal.pthread_sigmask(signal.SIG_BLOCK, [])))
            """,
            isolation,
        )
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)
    assert result.ok and result.stdout == b"[]\n"


def test_environment_is_empty_of_inherited_variables(isolation, monkeypatch):
    monkeypatch.setenv("RLVR_CODE_SECRET", "hunter2")
    result = run("import os; print(sorted(os.environ))", isolation)
    names = eval(result.stdout)
    assert "RLVR_CODE_SECRET" not in names
    assert set(names) <= {"PATH", "HOME", "MALLOC_ARENA_MAX", "LC_CTYPE"}  # LC_CTYPE: Python's C-locale coercion


def test_busy_loop_is_killed_at_the_wall_deadline(isolation):
    start = time.monotonic()
    result = run("while True: pass", isolation, limits=Limits(time_s=1.0))
    assert result.timed_out and not result.ok and result.signal is not None
    assert time.monotonic() - start < 8.0  # deadline 1 s; generous margin for a loaded box
    assert_clean(result)


def test_sleep_is_killed_at_the_wall_deadline(isolation):
    result = run("import time; time.sleep(100)", isolation, limits=Limits(time_s=1.0))
    assert result.timed_out and not result.ok and 0.9 < result.elapsed_s < 6.0
    assert_clean(result)


def test_rlimits_are_set_inside(isolation):
    result = run(
        """
        import resource as r
        for name in ("CPU", "AS", "STACK", "NPROC", "FSIZE", "NOFILE", "CORE"):
            print(name, *r.getrlimit(getattr(r, "RLIMIT_" + name)))
        """,
        isolation,
        limits=Limits(time_s=1.5, memory_mb=256, max_processes=5, output_bytes=999, open_files=32),
    )
    lines = dict(line.split(" ", 1) for line in result.stdout.decode().splitlines())
    assert lines["CPU"] == "2 3" and lines["AS"] == f"{256 << 20} {256 << 20}"
    hard = resource.getrlimit(resource.RLIMIT_STACK)[
        1
    ]  # the caller's: a program may raise its soft limit (a judge idiom)
    assert lines["STACK"] == f"{256 << 20} {hard}"
    assert lines["FSIZE"] == "1000 1000" and lines["NOFILE"] == "32 32" and lines["CORE"] == "0 0"
    if isolation[0] == "namespaces":
        assert lines["NPROC"] == "6 6"  # the keeper counts in the program's user namespace
    elif os.geteuid() == 0:
        assert lines["NPROC"] == "5 5"  # a uid of its own: nothing else counts


def test_fork_bomb_is_bounded_and_fully_killed(isolation):
    token = secrets.token_hex(6)
    result = run(
        f"""
        import os, time
        while True:
            try:
                if os.fork() == 0:
                    os.execv("/bin/sleep", ["sleep", "300.{int(token, 16) % 10**6}"])
            except OSError:
                time.sleep(0.01)
        """,
        isolation,
        limits=Limits(time_s=1.5, max_processes=8),
    )
    assert result.timed_out and not result.ok
    assert_clean(result, token=f"300.{int(token, 16) % 10**6}")


def test_process_limit_counts_only_this_program(isolation):
    result = run(
        """
        import os, time
        n = 0
        try:
            while True:
                if os.fork() == 0:
                    time.sleep(30); os._exit(0)
                n += 1
        except OSError as exc:
            print(n, exc.errno)
        """,
        isolation,
        limits=Limits(time_s=10.0, max_processes=6),
    )
    forked, err = map(int, result.stdout.split())
    assert err == errno.EAGAIN
    if isolation[0] == "namespaces" or os.geteuid() == 0:
        assert forked == 5  # 6 processes in the tree: the program and 5 children
    else:
        assert 1 <= forked <= 5  # basic mode as an ordinary user shares the user's count
    assert_clean(result)


def test_posix_spawned_children_do_not_outlive_the_program(isolation):
    token = f"301.{secrets.randbelow(10**6)}"
    result = run(
        f"""
        import os
        for _ in range(3):
            os.posix_spawn("/bin/sleep", ["sleep", "{token}"], {{}})
        print("spawned")
        """,
        isolation,
    )
    assert result.ok and result.stdout == b"spawned\n"
    assert_clean(result, token=token)


def test_children_that_leave_the_group_are_killed_too(isolation):
    token = f"302.{secrets.randbelow(10**6)}"
    result = run(
        f"""
        import os
        if os.fork() == 0:
            os.setsid()
            if os.fork() == 0:
                os.execv("/bin/sleep", ["sleep", "{token}"])
            os._exit(0)
        print("bye")
        """,
        isolation,
    )
    assert result.ok
    assert_clean(result, token=token)


def run_and_kill_the_keeper(source, isolation, token):
    """Start ``source``, SIGKILL its keeper once a child carrying ``token`` runs; the result."""
    from rlvr_code.sandbox import start_python

    mode, python = isolation
    with start_python(source, isolation=mode, interpreter=python, limits=FAST) as started:
        deadline = time.monotonic() + 8.0
        while not survivors(token) and time.monotonic() < deadline:
            time.sleep(0.02)
        os.kill(started.pid, signal.SIGKILL)
        return started.wait()


def test_a_keeper_killed_after_the_program_started_is_the_programs_failure(isolation):
    """Whatever dies once the program runs is the program's doing (only it was running): a
    failed result, not a SandboxError that would mask the item; its tree goes too."""
    token = f"306.{secrets.randbelow(10**6)}"
    source = f"import os, time\nprint('up', flush=True)\nos.posix_spawn('/bin/sleep', ['sleep', '{token}'], {{}})\ntime.sleep(30)"
    result = run_and_kill_the_keeper(source, isolation, token)
    assert result.keeper_lost and not result.ok and result.exit_code is None and result.stdout == b"up\n"
    assert_clean(result, token=token)


def test_a_daemon_outlives_neither_its_program_nor_a_lost_keeper(isolation):
    token = f"308.{secrets.randbelow(10**6)}"
    source = (
        f"import os, time\nif os.fork() == 0:\n    os.setsid()\n    if os.fork() == 0:\n"
        f"        os.execv('/bin/sleep', ['sleep', '{token}'])\n    os._exit(0)\ntime.sleep(30)"
    )
    result = run_and_kill_the_keeper(source, isolation, token)
    assert result.keeper_lost
    assert_clean(result, token=token)


def test_keeper_reports_cross_the_pipe_whole_and_in_order():
    from rlvr_code.sandbox.keeper import KeeperReport, ReportKind, read_reports, write_report

    sent = [
        KeeperReport(ReportKind.STARTED, pid=4242),
        KeeperReport(ReportKind.FINISHED, status=9 << 8, timed_out=True, elapsed_s=1.25),
        KeeperReport(ReportKind.ERROR, message="PermissionError: unshare: Operation not permitted\nsecond line"),
    ]
    r, w = os.pipe()
    for report in sent:
        write_report(w, report)
    os.write(w, b"\x02\x00\x00")  # bytes short of a whole report are not read as one
    os.close(w)
    assert read_reports(r) == sent
    os.close(r)
    r, w = os.pipe()
    write_report(w, KeeperReport(ReportKind.ERROR, message="é" * 3000))  # capped at 2000 bytes, under PIPE_BUF
    os.close(w)
    (report,) = read_reports(r)
    os.close(r)
    assert report.message == "é" * 1000 and report.describe() == "error " + "é" * 1000


def test_each_basic_run_as_root_has_a_uid_of_its_own_and_its_files_are_swept():
    from code_helpers import basic_python

    from rlvr_code.sandbox import RUN_UID_BASE

    if os.geteuid() != 0:
        pytest.skip("as an ordinary user the program runs as that user")
    name = f"rlvr-code-left-{secrets.token_hex(6)}"
    source = f"""
        import os
        for base in ("/tmp", "/dev/shm", "/var/tmp"):
            open(os.path.join(base, "{name}"), "w").write("x")
        os.mkdir("/tmp/{name}.d")
        open("/tmp/{name}.d/inner", "w").write("y")
        print(os.getuid(), os.getgid())
        """
    uids = []
    for _ in range(2):
        result = run(source, ("basic", basic_python()))
        uid, gid = map(int, result.stdout.split())
        assert result.ok and uid == gid and uid > RUN_UID_BASE
        uids.append(uid)
    assert uids[0] != uids[1]
    assert [
        p for p in (f"/tmp/{name}", f"/dev/shm/{name}", f"/var/tmp/{name}", f"/tmp/{name}.d") if os.path.exists(p)
    ] == []


def test_allocating_10_gb_fails(isolation):
    result = run("x = bytearray(10 * 1024**3)\nprint('allocated')", isolation)
    assert not result.ok and b"MemoryError" in result.stderr and result.stdout == b""


def test_one_gigabyte_of_output_is_cut_at_the_cap(isolation):
    result = run(
        """
        import sys
        chunk = "x" * (1 << 20)
        for _ in range(1024):
            sys.stdout.write(chunk)
        """,
        isolation,
        limits=Limits(time_s=10.0, output_bytes=1 << 16),
    )
    assert result.output_exceeded and not result.ok
    assert len(result.stdout) == 1 << 16


def test_output_just_under_the_cap_is_kept(isolation):
    result = run("import sys; sys.stdout.write('y' * 1000)", isolation, limits=Limits(output_bytes=1000))
    assert result.ok and result.stdout == b"y" * 1000


def test_program_does_not_see_host_files_or_processes():
    isolation = ("namespaces", None)
    result = run(
        """
        import os
        for path in ("/etc/passwd", "/proc/1/environ", "/root/.bashrc", "/work/main", "/home", "/var"):
            print(path, os.path.exists(path))
        print(os.listdir("/etc"))
        """,
        isolation,
    )
    lines = result.stdout.decode().splitlines()
    assert lines[:-1] == [
        f"{p} False" for p in ("/etc/passwd", "/proc/1/environ", "/root/.bashrc", "/work/main", "/home", "/var")
    ]
    assert lines[-1] in ("['ld.so.cache']", "[]")


def test_reading_etc_passwd_fails_in_namespaces():
    result = run("print(open('/etc/passwd').read())", ("namespaces", None))
    assert not result.ok and b"FileNotFoundError" in result.stderr and b"root:" not in result.stdout


def test_writing_outside_the_temp_dir_leaves_no_file(tmp_path):
    host_tmp = f"/tmp/rlvr-code-escape-{secrets.token_hex(6)}"
    inside_test_dir = tmp_path / "escaped.txt"
    result = run(
        f"""
        import os
        for path in ({host_tmp!r}, {str(inside_test_dir)!r}, "/usr/escaped", "/escaped"):
            try:
                open(path, "w").write("pwned")
                print(path, "written")
            except OSError as exc:
                print(path, type(exc).__name__)
        open("scratch.txt", "w").write("fine")
        print(open("scratch.txt").read())
        """,
        ("namespaces", None),
    )
    assert result.ok and result.stdout.decode().splitlines()[-1] == "fine"
    assert not os.path.exists(host_tmp) and not inside_test_dir.exists()
    assert not os.path.exists("/usr/escaped") and not os.path.exists("/escaped")


def test_working_directory_is_removed_afterwards(isolation, tmp_path, monkeypatch):
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    result = run("open('left.txt', 'w').write('x'); import os; print(os.getcwd())", isolation)
    assert result.ok
    if isolation[0] == "basic":  # the host directory itself (as root: /tmp when nobody cannot reach $TMPDIR)
        cwd = result.stdout.decode().strip()
        assert cwd.endswith("/work") and "rlvr-code-" in cwd and not os.path.exists(os.path.dirname(cwd))
    else:
        assert result.stdout == b"/work\n"
    assert list(tmp_path.iterdir()) == []


def test_tmpfs_caps_what_the_program_writes():
    result = run(
        """
        chunk = b"z" * (1 << 20)
        n = 0
        try:
            for i in range(100):
                with open(f"f{i}", "wb") as f:
                    f.write(chunk)
                n += 1
        except OSError as exc:
            print(n, exc.errno)
        """,
        ("namespaces", None),
        limits=Limits(time_s=10.0, disk_mb=8, output_bytes=2 << 20),
    )
    written, err = map(int, result.stdout.split())
    assert err == errno.ENOSPC and written < 8


@pytest.fixture
def listener():
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    server.setblocking(False)
    yield server
    server.close()


def test_no_connection_reaches_a_host_listener(isolation, listener):
    port = listener.getsockname()[1]
    result = run(
        f"""
        import ctypes, socket, struct
        results = []
        try:
            socket.create_connection(("127.0.0.1", {port}), timeout=1).sendall(b"hi")
            results.append("socket module: connected")
        except OSError as exc:
            results.append(f"socket module: {{exc.errno}}")
        import _socket
        try:
            _socket.socket(_socket.AF_INET, _socket.SOCK_STREAM)
            results.append("_socket: created")
        except OSError as exc:
            results.append(f"_socket: {{exc.errno}}")
        libc = ctypes.CDLL(None, use_errno=True)
        fd = libc.syscall(41, 2, 1, 0)  # raw socket(AF_INET, SOCK_STREAM) on x86_64
        if fd >= 0:
            addr = struct.pack("!HH4s8x", 2, {port}, bytes([127, 0, 0, 1]))
            addr = struct.pack("=H", 2) + addr[2:]
            rc = libc.connect(fd, addr, len(addr))
            results.append(f"raw syscall: fd {{fd}} connect {{rc}}")
        else:
            results.append(f"raw syscall: {{ctypes.get_errno()}}")
        print("\\n".join(results))
        """,
        isolation,
    )
    lines = result.stdout.decode().splitlines()
    assert lines[:2] == [f"socket module: {errno.EACCES}", f"_socket: {errno.EACCES}"]
    if os.uname().machine == "x86_64":
        assert lines[2] == f"raw syscall: {errno.EACCES}"
    with pytest.raises(BlockingIOError):
        listener.accept()


def test_io_uring_and_foreign_abi_are_blocked(isolation):
    if os.uname().machine != "x86_64":
        pytest.skip("syscall numbers below are x86_64")
    result = run(
        """
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        params = ctypes.create_string_buffer(120)
        print(libc.syscall(425, 8, params), ctypes.get_errno())       # io_uring_setup
        print(libc.syscall(0x40000000 + 41, 2, 1, 0), ctypes.get_errno())  # x32 socket
        """,
        isolation,
    )
    assert result.stdout.decode().split() == ["-1", str(errno.EACCES), "-1", str(errno.EACCES)]


def test_a_32_bit_system_call_kills_the_program(isolation):
    if os.uname().machine != "x86_64":
        pytest.skip("x86 machine code")
    result = run(
        """
        import ctypes, mmap
        page = mmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
        page.write(b"\\xb8\\x14\\x00\\x00\\x00\\xcd\\x80\\xc3")  # mov eax, 20 (i386 getpid); int 0x80; ret
        print(ctypes.CFUNCTYPE(ctypes.c_int)(ctypes.addressof(ctypes.c_char.from_buffer(page)))())
        """,
        isolation,
    )
    assert result.signal == signal.SIGSYS and result.stdout == b""


def test_unix_socketpair_still_works(isolation):
    result = run("import socket; a, b = socket.socketpair(); a.send(b'x'); print(b.recv(1))", isolation)
    assert result.ok and result.stdout == b"b'x'\n"


def test_kernel_attack_surface_calls_are_denied_and_process_creation_still_works(isolation):
    if os.uname().machine != "x86_64":
        pytest.skip("syscall numbers below are x86_64")
    result = run(
        """
        import ctypes, os, subprocess, threading
        libc = ctypes.CDLL(None, use_errno=True)
        def call(nr, *args):
            rc = libc.syscall(nr, *args)
            return f"{rc} {ctypes.get_errno()}"
        print("unshare", call(272, 0x10000000))                # unshare(CLONE_NEWUSER)
        print("clone-ns", call(56, 0x10000000 | 17, 0, 0, 0, 0))  # clone(CLONE_NEWUSER | SIGCHLD)
        print("ptrace", call(101, 0, 0, 0, 0))                   # ptrace(PTRACE_TRACEME)
        print("mount", call(165, b"none", b"/tmp", b"tmpfs", 0, 0))
        print("bpf", call(321, 0, 0, 0))
        print("keyctl", call(250, 0, 0, 0, 0, 0))
        print("clone3", call(435, 0, 0))
        t = threading.Thread(target=lambda: None); t.start(); t.join()
        pid = os.fork()
        if pid == 0:
            os._exit(7)
        print("fork", os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))
        print("subprocess", subprocess.run(["/bin/echo", "hi"], capture_output=True).stdout.decode().strip())
        """,
        isolation,
    )
    lines = dict(line.split(" ", 1) for line in result.stdout.decode().splitlines())
    for name in ("unshare", "clone-ns", "ptrace", "mount", "bpf", "keyctl"):
        assert lines[name] == f"-1 {errno.EACCES}", name
    assert lines["clone3"] == f"-1 {errno.ENOSYS}"
    assert lines["fork"] == "7" and lines["subprocess"] == "hi" and result.ok


def test_unknown_isolation_is_refused():
    with pytest.raises(
        ValueError, match=r"Unsupported isolation: 'docker'. Supported: \['auto', 'namespaces', 'basic'\]"
    ):
        run_python("pass", isolation="docker")


def test_missing_interpreter_is_a_sandbox_error_not_a_program_failure():
    with pytest.raises(SandboxError, match="/nonexistent/python3 is not an executable"):
        run_python("pass", interpreter="/nonexistent/python3")


@pytest.fixture
def world_readable_dir():
    import shutil
    import tempfile

    path = tempfile.mkdtemp(dir="/tmp")
    os.chmod(path, 0o755)
    yield path
    shutil.rmtree(path)


def test_a_program_that_cannot_start_is_a_sandbox_error(isolation, world_readable_dir):
    os.makedirs(f"{world_readable_dir}/prefix/bin", mode=0o755)
    broken = f"{world_readable_dir}/prefix/bin/python3"
    with open(broken, "wb") as f:
        f.write(b"\x7fELF not really")
    os.chmod(broken, 0o755)
    with pytest.raises(SandboxError, match="cannot start the program: OSError: .*Exec format error"):
        run_python("print(1)", isolation=isolation[0], interpreter=broken)


def test_an_interpreter_directly_under_a_shared_directory_is_refused(world_readable_dir):
    python = f"{world_readable_dir}/python3"  # prefix would be /tmp: the host's /tmp bound into the sandbox
    with open(python, "wb") as f:
        f.write(b"")
    os.chmod(python, 0o755)
    with pytest.raises(SandboxError, match="lives directly under /tmp"):
        run_python("print(1)", isolation="namespaces", interpreter=python)


def test_limits_never_exceed_the_callers_hard_limits(isolation):
    import resource

    pid = os.fork()
    if pid == 0:
        try:
            resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))
            result = run(
                "import resource; print(*resource.getrlimit(resource.RLIMIT_AS))",
                isolation,
                limits=Limits(time_s=10.0, memory_mb=4096),
            )
            os._exit(0 if result.stdout == f"{1 << 30} {1 << 30}\n".encode() else 1)
        finally:
            os._exit(2)
    assert os.waitpid(pid, 0)[1] == 0


NONROOT_SCRIPT = """
import json, os, sys
sys.path.insert(0, {src!r})
from rlvr_code.sandbox import Limits, run_python
out = {{}}
for name, source in {{
    "whoami": "import os; print(os.getuid(), os.getpid(), sorted(os.listdir('/')))",
    "socket": "import socket; socket.socket()",
    "escape": "open({escape!r}, 'w').write('x')",
    "forks": "import os\\nn = 0\\ntry:\\n    while True:\\n        if os.fork() == 0:\\n            import time; time.sleep(20); os._exit(0)\\n        n += 1\\nexcept OSError:\\n    print(n)",
}}.items():
    r = run_python(source, isolation="namespaces", limits=Limits(time_s=5.0, max_processes=6))
    out[name] = [r.exit_code, r.stdout.decode()]
r = run_python({kill_keeper!r}, isolation="basic", interpreter=sys.executable, limits=Limits(time_s=5.0))
out["kill_keeper"] = [r.exit_code, r.stdout.decode(), r.keeper_lost]
print(json.dumps(out))
"""


@pytest.mark.skipif(os.geteuid() != 0, reason="as a non-root user every other test already takes this path")
def test_unprivileged_caller_path():
    """The namespaces mode as an ordinary user (user namespace first, then mounts), run as nobody."""
    import json
    import shutil
    import subprocess

    from code_helpers import runnable_by_others

    python = shutil.which("python3", path="/usr/bin:/bin") or ""
    src = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "src")
    if not (shutil.which("setpriv") and python and runnable_by_others(python) and runnable_by_others(src)):
        pytest.skip("needs setpriv and a system python3 and sources that nobody can read")
    escape = f"/tmp/rlvr-code-escape-{secrets.token_hex(6)}"  # writable by nobody on the host
    token = f"307.{secrets.randbelow(10**6)}"
    kill_keeper = (
        f"import os\nos.posix_spawn('/bin/sleep', ['sleep', '{token}'], {{}})\nprint(0, flush=True)\n"
        "os.kill(os.getppid(), 9)\nimport time\ntime.sleep(30)"
    )
    script = NONROOT_SCRIPT.format(src=src, escape=escape, kill_keeper=kill_keeper)
    done = subprocess.run(
        ["setpriv", "--reuid", "65534", "--regid", "65534", "--clear-groups", python, "-c", script],
        capture_output=True,
        text=True,
        timeout=120,
        env={"PATH": "/usr/bin:/bin", "TMPDIR": "/tmp"},
    )
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["whoami"][0] == 0 and out["whoami"][1].startswith("1000 1 ")
    assert out["socket"][0] == 1 and out["escape"][0] == 0 and not os.path.exists(escape)
    assert out["forks"] == [0, "5\n"]
    # basic mode as an ordinary user: the program can kill its keeper (same uid); that is its own failure
    assert out["kill_keeper"] == [None, "0\n", True] and survivors(token, wait_s=2.0) == []


def test_auto_falls_back_to_basic_with_a_warning_when_namespaces_are_refused(monkeypatch, caplog):
    from code_helpers import basic_python

    from rlvr_code import sandbox
    from rlvr_code.sandbox import isolation as modes

    def refused(cfg):
        raise PermissionError(errno.EPERM, "unshare: Operation not permitted")

    monkeypatch.setattr(modes, "setup_namespaces", refused)  # the keeper is a fork: it sees the patch
    monkeypatch.setattr(sandbox, "_probed", {})
    python = basic_python()
    with caplog.at_level("WARNING", logger="rlvr_code.sandbox"):
        assert not sandbox.namespaces_available()
        result = run_python("print('fallback')", isolation="auto", interpreter=python)
    assert result.isolation == "basic" and result.stdout == b"fallback\n"
    assert "falling back to basic isolation" in caplog.text and "Operation not permitted" in caplog.text
    with pytest.raises(SandboxError, match="Operation not permitted"):
        run_python("print(1)", isolation="namespaces")


# ---------------------------------------------------------------- directory bombs (issue 21, item 2)

NESTED = """
import os
for where in WHERE:
    try:
        os.chdir(where)
        for _ in range(3000):
            os.mkdir("d")
            os.chdir("d")
    except OSError:
        pass
print(ANSWER)
"""


def _our_leftovers() -> list[str]:
    """This process's run directories, and what any run handed to a background remover or left to a sweep."""
    import glob
    import tempfile

    found = []
    for folder in {tempfile.gettempdir(), "/tmp", "/var/tmp", "/dev/shm"}:
        for pattern in (f"rlvr-code-{os.getpid()}-*", "rlvr-code-*-discard-*", "rlvr-code-*-leftover-*"):
            found += glob.glob(f"{folder}/{pattern}")
    return sorted(found)


@pytest.mark.parametrize("answer", ["4", "5"], ids=["correct", "wrong"])
def test_directories_nested_3000_deep_get_the_programs_score_and_are_removed(isolation, answer):
    """shutil.rmtree recursed once per level: RecursionError, the item masked and the tree left for
    the first run of every later worker (masked there too). Now: the program's own score, and nothing left."""
    from rlvr_code.plugins import CodeTestsOptions, CodeTestsScorer
    from rlvr_code.sandbox import remove_stale_dirs
    from rlvr_code.sandbox.cleanup import wait_for_discards

    mode, python = isolation
    where = [".", "/tmp", "/var/tmp", "/dev/shm"] if mode == "basic" and os.geteuid() == 0 else ["."]
    program = NESTED.replace("WHERE", repr(where)).replace("ANSWER", answer)
    scorer = CodeTestsScorer(
        CodeTestsOptions(isolation=mode, python=python or "", time_limit_s=10.0, total_time_s=20.0)
    )
    score = scorer(prompt="", completion=f"```python\n{program}```", example={"tests": [{"input": "", "output": "4"}]})
    assert score == (1.0 if answer == "4" else 0.0)
    remove_stale_dirs()  # what a later worker's first run does: must not raise, and must not take long
    assert wait_for_discards(120.0)
    assert _our_leftovers() == []


def test_a_stale_directory_nested_3000_deep_is_swept_in_the_background(tmp_path):
    from rlvr_code.sandbox import remove_stale_dirs
    from rlvr_code.sandbox.cleanup import remove_tree, wait_for_discards

    dead = os.fork()
    if dead == 0:
        os._exit(0)
    os.waitpid(dead, 0)
    stale = tmp_path / f"rlvr-code-{dead}-x"
    stale.mkdir()
    fd = os.open(stale, os.O_RDONLY)
    for _ in range(3000):
        os.mkdir("d", dir_fd=fd)
        inner = os.open("d", os.O_RDONLY, dir_fd=fd)
        os.close(fd)
        fd = inner
    os.close(fd)
    try:
        start = time.monotonic()
        assert remove_stale_dirs(str(tmp_path)) == [str(stale)]
        assert time.monotonic() - start < 1.0  # the sweeping run does not pay for it
        assert wait_for_discards(120.0)
        assert os.listdir(tmp_path) == []
    finally:  # pytest's own clean-up of old temporary directories is shutil.rmtree: RecursionError
        for left in os.listdir(tmp_path):
            remove_tree(str(tmp_path / left))


def test_directories_made_until_the_deadline_do_not_delay_the_result(isolation):
    """Four processes making directories until they are killed: the result comes at the deadline
    plus the kill, not after the minutes it takes to remove them; they are removed afterwards."""
    from rlvr_code.sandbox import remove_stale_dirs
    from rlvr_code.sandbox.cleanup import wait_for_discards

    program = """
    import os
    for _ in range(3):
        if os.fork() == 0:
            break
    os.chdir("/tmp" if os.getpid() % 2 else ".")  # basic mode as root: the keeper's sweep of the run uid's files
    os.mkdir(str(os.getpid()))
    os.chdir(str(os.getpid()))
    i = 0
    while True:
        os.makedirs(f"{i}/a/b")
        i += 1
    """
    start = time.monotonic()
    result = run(program, isolation, limits=Limits(time_s=2.0))
    elapsed = time.monotonic() - start
    assert result.timed_out and not result.ok
    assert elapsed < 2.0 + 2.5, elapsed  # deadline + kill + a bounded foreground clean-up, on a loaded box
    assert_clean(result)
    remove_stale_dirs()  # what the worker's next run does after a keeper left files (in the background)
    assert wait_for_discards(300.0)
    assert _our_leftovers() == []


def test_remove_tree_follows_no_link_and_stops_at_its_deadline(tmp_path):
    from rlvr_code.sandbox.cleanup import remove_tree

    outside = tmp_path / "outside"
    (outside / "kept").mkdir(parents=True)
    (outside / "kept" / "file").write_text("x")
    tree = tmp_path / "tree"
    (tree / "a" / "b").mkdir(parents=True)
    (tree / "a" / "b" / "f").write_text("y")
    (tree / "a" / "link").symlink_to(outside)  # a link to a directory: removed, never entered
    (tree / "locked").mkdir()
    (tree / "locked" / "g").write_text("z")
    os.chmod(tree / "locked", 0)
    assert remove_tree(str(tree), deadline=time.monotonic() - 1) is False and tree.exists()  # no time: untouched
    assert remove_tree(str(tree)) is True
    assert not tree.exists() and (outside / "kept" / "file").read_text() == "x"
    assert remove_tree(str(tree)) is True  # already gone
