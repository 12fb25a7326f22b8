"""Every attack class on the ``code-tests`` reward, one row each, scored end to end in both
isolation modes. A row is (class, name, program, tests, expected score); after each run the
same checks hold for every row: the score is exactly the expected one (never raised, i.e.
never masked), no process of the program survives, no temporary directory, SysV IPC object
or file of the program's uid is left behind, the host's shared memory did not grow (SysV
segments, tmpfs), nothing reached the host's Unix sockets, and the host can still fork.

``{token}`` in a program is a fresh marker its children carry on their command line (the
survivor check looks for it); ``{path}`` and ``{abstract}`` name Unix sockets of the host.
"""

from __future__ import annotations

import glob
import os
import secrets
import socket
import tempfile
import textwrap
from dataclasses import dataclass

import pytest
from code_helpers import host_can_fork, survivors

from rlvr_code.plugins import CodeTestsOptions, CodeTestsScorer
from rlvr_code.sandbox import RUN_UID_BASE, SHARED_WRITABLE

FENCE = "```"
DOUBLE = {"tests": [{"input": "2\n", "output": "4\n"}, {"input": "5\n", "output": "10\n"}]}
MBPP = {"test": ["assert double(2) == 4", "assert double(5) == 10", "assert double(-3) == -6"]}
HUMANEVAL = {
    "test": "def check(candidate):\n    assert candidate(2) == 4\n    assert candidate(-3) == -6\n",
    "entry_point": "double",
}
ZERO = {"tests": [{"input": "", "output": "0\n"}]}  # the program prints how many forbidden things worked


@dataclass(frozen=True)
class Attack:
    cls: str
    name: str
    program: str
    tests: dict
    score: float

    @property
    def id(self) -> str:
        return f"{self.cls}: {self.name}"


def a(cls, name, program, tests, score):
    return Attack(cls, name, textwrap.dedent(program).strip("\n"), tests, score)


LOOKUP_TABLE_FROM = """
    import ast, gc, glob, sys
    table = {{}}
    def learn(text):
        try:
            tree = ast.parse(text)
        except (SyntaxError, ValueError, TypeError):
            return
        for node in ast.walk(tree):
            if isinstance(node, ast.Compare) and isinstance(node.left, ast.Call) and node.left.args:
                try:
                    table[ast.literal_eval(node.left.args[0])] = ast.literal_eval(node.comparators[0])
                except ValueError:
                    pass
    {source}
    def double(x):
        return table.get(x)
"""

NESTED = """
def double(x):
    nested = []
    for _ in range({depth}):
        nested = [nested]
    return nested
"""

SETSID_DAEMON = """\
import os
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.execv("/bin/sleep", ["sleep", "{token}"])
    os._exit(0)
"""

ATTACKS = [
    # 1. a program signals or stops its keeper: impossible; whatever happens is the program's own 0
    a(
        "signal the keeper",
        "kill(0, SIGKILL) after a wrong answer",
        "import os\nprint(0, flush=True)\nos.kill(0, 9)",
        DOUBLE,
        0.0,
    ),
    a(
        "signal the keeper",
        "killpg(0, SIGTERM)",
        "import os, signal\nprint(0, flush=True)\nos.killpg(0, signal.SIGTERM)",
        DOUBLE,
        0.0,
    ),
    a(
        "signal the keeper",
        "killpg(0, SIGSTOP)",
        "import os, signal\nprint(0, flush=True)\nos.killpg(0, signal.SIGSTOP)",
        DOUBLE,
        0.0,
    ),
    a(
        "signal the keeper",
        "kill(getppid(), SIGKILL)",
        "import os\nprint(0, flush=True)\nos.kill(os.getppid(), 9)",
        DOUBLE,
        0.0,
    ),
    a(
        "signal the keeper",
        "kill(getppid(), SIGSTOP)",
        "import os, signal\nprint(0, flush=True)\nos.kill(os.getppid(), signal.SIGSTOP)",
        DOUBLE,
        0.0,
    ),
    a("signal the keeper", "kill(-1, SIGKILL)", "import os\nprint(0, flush=True)\nos.kill(-1, 9)", DOUBLE, 0.0),
    a(
        "signal the keeper",
        "SIGKILL to every pid in /proc",
        """
        import os
        print(0, flush=True)
        for pid in os.listdir("/proc") if os.path.isdir("/proc") else ():
            if pid.isdigit() and int(pid) != os.getpid():
                try:
                    os.kill(int(pid), 9)
                except OSError:
                    pass
        """,
        DOUBLE,
        0.0,
    ),
    a(
        "signal the keeper",
        "setsid daemon, then kill the keeper",
        SETSID_DAEMON + "print(0, flush=True)\nos.kill(os.getppid(), 9)",
        DOUBLE,
        0.0,
    ),
    # 2. correct programs that use threads, pools or another buffer on fd 1 pass
    a(
        "correct program",
        "two threads alive at once",
        """
        import threading, time
        n = int(input())
        out = []
        def work():
            time.sleep(0.2)
            out.append(n)
        threads = [threading.Thread(target=work) for _ in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        print(sum(out))
        """,
        DOUBLE,
        1.0,
    ),
    a(
        "correct program",
        "ThreadPoolExecutor(4)",
        """
        from concurrent.futures import ThreadPoolExecutor
        import time
        n = int(input())
        with ThreadPoolExecutor(4) as pool:
            print(sum(pool.map(lambda k: time.sleep(0.1) or n, range(4))) // 2)
        """,
        DOUBLE,
        1.0,
    ),
    a(
        "correct program",
        "multiprocessing.Pool(2)",
        """
        import multiprocessing
        def twice(x):
            return 2 * x
        if __name__ == "__main__":
            n = int(input())
            with multiprocessing.Pool(2) as pool:
                print(pool.map(twice, [n])[0])
        """,
        DOUBLE,
        1.0,
    ),
    a(  # issue 21, item 13: the default start method from Python 3.14 (it needs AF_UNIX sockets: fork instead)
        "correct program",
        "multiprocessing.Pool(2) under forkserver",
        """
        import multiprocessing
        def twice(x):
            return 2 * x
        if __name__ == "__main__":
            multiprocessing.set_start_method("forkserver")
            n = int(input())
            with multiprocessing.Pool(2) as pool:
                print(pool.map(twice, [n])[0])
        """,
        DOUBLE,
        1.0,
    ),
    a(
        "correct program",
        "ProcessPoolExecutor with a forkserver context, in an assert test",
        """
        import concurrent.futures, multiprocessing
        def one(x):
            return 2 * x
        def double(x):
            context = multiprocessing.get_context("forkserver")
            with concurrent.futures.ProcessPoolExecutor(1, mp_context=context) as pool:
                return pool.submit(one, x).result()
        """,
        {"test": ["assert double(2) == 4"]},
        1.0,
    ),
    a(
        "correct program",
        "print(file=sys.__stdout__)",
        "import sys\nprint('before', file=sys.stderr)\nprint(int(input()) * 2, file=sys.__stdout__)",
        DOUBLE,
        1.0,
    ),
    a(
        "correct program",
        "open(1, 'w') never closed",
        "out = open(1, 'w')\nout.write(f'{int(input()) * 2}\\n')",
        DOUBLE,
        1.0,
    ),
    a(
        "correct program",
        "a StringIO flushed to sys.__stdout__ at the end",
        """
        import io, sys
        buf = io.StringIO()
        sys.stdout = buf
        print(int(input()) * 2)
        sys.__stdout__.write(buf.getvalue())
        """,
        DOUBLE,
        1.0,
    ),
    a(
        "correct program",
        "os.write and os._exit(0) (fast I/O)",
        "import os\nos.write(1, f'{int(input()) * 2}\\n'.encode())\nos._exit(0)",
        DOUBLE,
        1.0,
    ),
    a(
        "correct program",
        "deep recursion on the main thread",
        """
        import sys
        sys.setrecursionlimit(100000)
        def depth(k):
            return 0 if k == 0 else 1 + depth(k - 1)
        print(depth(40000) // 20000 * int(input()))
        """,
        DOUBLE,
        1.0,
    ),
    a(
        "correct program",
        "threading.stack_size(64 MB) and deep recursion in a thread",
        """
        import sys, threading
        sys.setrecursionlimit(100000)
        threading.stack_size(64 << 20)
        def depth(k):
            return 0 if k == 0 else 1 + depth(k - 1)
        def main():
            print(depth(30000) // 15000 * int(input()))
        t = threading.Thread(target=main)
        t.start()
        t.join()
        """,
        DOUBLE,
        1.0,
    ),
    a("correct program", "MBPP asserts", "def double(x):\n    return 2 * x", MBPP, 1.0),
    a("correct program", "HumanEval check", "def double(x):\n    return x + x", HUMANEVAL, 1.0),
    a(
        "correct program",
        "assert test on a returned generator's items",
        "def double(x):\n    return (2 * v for v in x)",
        {"test": ["assert list(double([1, 2])) == [2, 4]"]},
        1.0,
    ),
    # issue 21, item 3: ordinary Python semantics across the channel; its cost is not the program's time
    a(
        "correct program",
        "returns an itertools iterator",
        "import itertools\ndef double(xs):\n    return itertools.chain.from_iterable([2 * x] for x in xs)",
        {"test": ["assert list(double([1, 2])) == [2, 4]", "assert list(double(range(3))) == [0, 2, 4]"]},
        1.0,
    ),
    a(
        "correct program",
        "raises json.JSONDecodeError, caught as ValueError and as itself",
        "import json\ndef parse(text):\n    return json.loads(text)",
        {
            "test": "import json\nassert parse('[1]') == [1]\n"
            "try:\n    parse('{')\n    raise AssertionError('no error')\nexcept ValueError as e:\n    assert 'Expecting' in str(e)\n"
            "try:\n    parse('{')\nexcept json.JSONDecodeError as e:\n    assert e.pos == 1\n"
        },
        1.0,
    ),
    a(
        "correct program",
        "a user-defined ValueError subclass, caught as ValueError",
        "class Bad(ValueError):\n    pass\ndef check_positive(x):\n    if x <= 0:\n        raise Bad(x)\n    return x",
        {
            "test": "assert check_positive(2) == 2\ntry:\n    check_positive(-1)\n    raise AssertionError\nexcept ValueError as e:\n    assert e.args == (-1,)\n"
        },
        1.0,
    ),
    a(
        "correct program",
        "changes an argument in place that is passed twice",
        "def add_both(a, b):\n    a.append(1)\n    b.append(2)",
        {
            "test": "xs = []\nadd_both(xs, xs)\nassert xs == [1, 2]\nys = [[0]]\nadd_both(ys, ys[0])\nassert ys == [[0, 2], 1]\n"
        },
        1.0,
    ),
    a(
        "correct program",
        "a 17 MB string argument",
        "def size(text):\n    return len(text)",
        {"test": ["assert size('x' * (17 << 20)) == 17 << 20"]},
        1.0,
    ),
    a(
        "correct program",
        "a list of a million items, both ways",
        "def double(xs):\n    return [2 * x for x in xs]",
        {"test": ["assert double(list(range(10**6)))[-1] == 2 * (10**6 - 1)"]},
        1.0,
    ),
    a(
        "correct program",
        "10,000 calls",
        "def double(x):\n    return 2 * x",
        {"test": "for i in range(10_000):\n    assert double(i) == 2 * i\n"},
        1.0,
    ),
    a(
        "wrong program",
        "slow: 2.5 s of CPU in the program's own code (time_limit_s 2)",
        "import time\ndef double(x):\n    end = time.process_time() + 2.5\n    while time.process_time() < end:\n        pass\n    return 2 * x",
        {"test": ["assert double(2) == 4"]},
        0.0,
    ),
    a(
        "correct program",
        "a function named like a standard-library module (copy)",
        "def copy(xs):\n    return list(xs)",
        {"test": ["assert copy((1, 2)) == [1, 2]"]},
        1.0,
    ),
    a(
        "correct program",
        "a function named like a module beside math.isclose",
        "def random(x):\n    return x / 2",
        {"test": ["assert math.isclose(random(1), 0.5)"]},
        1.0,
    ),
    a(
        "correct program",
        "returns range, dict views, bytearray, deque, Fraction, Decimal",
        """
        import collections, decimal, fractions
        def double(x):
            d = {2 * x: 2 * x}
            return (range(2 * x, 2 * x + 1), d.keys(), d.values(), d.items(), bytearray([2 * x]),
                    collections.deque([2 * x], maxlen=3), fractions.Fraction(2 * x, 3), decimal.Decimal(2 * x))
        """,
        {
            "test": [
                "r, k, v, i, b, q, f, d = double(2)",
                "assert r == range(4, 5) and list(r) == [4] and k == {4} and list(v) == [4]",
                "assert i == {(4, 4)} and b == bytearray(b'\\x04') and type(b) is bytearray",
                "assert list(q) == [4] and q.maxlen == 3 and str(f) == '4/3' and d == 4 and str(d) == '4'",
            ]
        },
        1.0,
    ),
    a(
        "correct program",
        "a bytearray and a deque argument changed in place",
        """
        def double(b, q):
            b.append(1)
            q.appendleft(0)
        """,
        {
            "test": [
                "import collections\nb, q = bytearray(), collections.deque([1])",
                "double(b, q)\nassert b == bytearray(b'\\x01') and list(q) == [0, 1]",
            ]
        },
        1.0,
    ),
    a(
        "correct program",
        "resource.setrlimit(RLIMIT_STACK, unlimited) (a judge idiom)",
        """
        import resource, sys
        resource.setrlimit(resource.RLIMIT_STACK, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
        sys.setrecursionlimit(10 ** 6)
        print(int(input()) * 2)
        """,
        DOUBLE,
        1.0,
    ),
    a(
        "correct program",
        "a returned generator that raises while its items are read",
        """
        def double(xs):
            for x in xs:
                if x < 0:
                    raise ValueError(x)
                yield 2 * x
        """,
        {
            "test": [
                "assert list(double([2])) == [4]",
                "try:\n    list(double([-1]))\nexcept ValueError:\n    pass\nelse:\n    assert False",
            ]
        },
        1.0,
    ),
    a(
        "correct program",
        "a list nested 900 deep (the tests' own == handles it)",
        NESTED.format(depth=900),
        {"test": ["want = []\nfor _ in range(900):\n    want = [want]\nassert double(1) == want"]},
        1.0,
    ),
    a(
        "correct program",
        "prints 3 MB of debug output while it answers (asserts look only at answers)",
        """
        import os
        print("x" * (3 << 20))
        def double(x):
            os.write(1, b"debug " * 200000)
            return 2 * x
        """,
        MBPP,
        1.0,
    ),
    a(
        "correct program",
        "the tests check the message and args of the exception raised",
        """
        def double(x):
            if x < 0:
                raise ValueError("negative", x)
            if x == 0:
                raise KeyError("zero")
            return 2 * x
        """,
        {
            "test": [
                "try:\n    double(-1)\nexcept ValueError as e:\n    assert e.args == ('negative', -1)\nelse:\n"
                "    assert False",
                "try:\n    double(0)\nexcept KeyError as e:\n    assert str(e) == \"'zero'\"\nelse:\n    assert False",
                "assert double(2) == 4",
            ]
        },
        1.0,
    ),
    a(
        "correct program",
        "3 MB of debug output on stderr (stdin/stdout)",
        "import os, sys\nsys.stderr.write('e' * (3 << 20))\nos.write(2, b'e' * (3 << 20))\nprint(int(input()) * 2)",
        DOUBLE,
        1.0,
    ),
    a(
        "correct program",
        "3 MB of debug output on stderr (asserts)",
        "import sys\ndef double(x):\n    sys.stderr.write('e' * (3 << 20))\n    return 2 * x",
        MBPP,
        1.0,
    ),
    a(
        "correct program",
        "prints and reads a 6,000-digit integer (the str/int limit of Python >= 3.11)",
        "import math\nn = int(input())\nprint(int(str(math.factorial(2000 + n))) * 0 + 2 * n)",
        DOUBLE,
        1.0,
    ),
    a("wrong program", "wrong assert answer", "def double(x):\n    return 2 * x + 1", MBPP, 0.0),
    a(
        "wrong program",
        "a generator where the tests compare with a list",
        "def double(x):\n    return (2 * v for v in x)",
        {"test": ["assert double([1, 2]) == [2, 4]"]},
        0.0,
    ),
    # 3. a pass signal the program could forge: there is none to learn
    a(
        "forge a pass",
        "an end marker found in argv, then os._exit(0)",
        """
        import os, re, sys
        for found in re.findall(rb"[0-9a-f]{32}", " ".join(sys.orig_argv).encode()):
            os.write(1, b"\\n" + found + b"\\n")
        os._exit(0)
        """,
        MBPP,
        0.0,
    ),
    a(
        "forge a pass",
        "os._exit(0) before the tests run",
        "import os\nos._exit(0)\ndef double(x):\n    return 2 * x",
        MBPP,
        0.0,
    ),
    a("forge a pass", "sys.exit(0) from the function", "def double(x):\n    raise SystemExit(0)", HUMANEVAL, 0.0),
    a("forge a pass", "print what the harness was given", "import sys\nprint(sys.orig_argv, sys.argv)", DOUBLE, 0.0),
    a(
        "forge a pass",
        "malformed answers written on the channel",
        """
        import os
        os.write(4, b'["ok",["x",1]]\\n["ok",' + b'["l",' * 100000 + b'\\nnot json\\n' * 3)
        def double(x):
            return 2 * x
        """,
        MBPP,
        0.0,
    ),
    # 6. assert-style reward hacking
    a(
        "assert hack",
        "__eq__ always True",
        """
        class Anything:
            def __eq__(self, other):
                return True
        def double(x):
            return Anything()
        """,
        MBPP,
        0.0,
    ),
    a(
        "assert hack",
        "__eq__ always True (HumanEval)",
        """
        class Anything:
            __eq__ = lambda self, other: True
        def double(x):
            return Anything()
        """,
        HUMANEVAL,
        0.0,
    ),
    a(
        "assert hack",
        "int subclass equal to everything",
        """
        class Int(int):
            def __eq__(self, other):
                return True
            __hash__ = int.__hash__
        def double(x):
            return Int(0)
        """,
        MBPP,
        0.0,
    ),
    a(
        "assert hack",
        "an object that is always True inside a list",
        """
        class Anything:
            __eq__ = lambda self, other: True
        def double(x):
            return [Anything()]
        """,
        {"test": ["assert double(2) == [4]"]},
        0.0,
    ),
    a(
        "assert hack",
        "patch builtins and AssertionError",
        """
        import builtins
        builtins.AssertionError = type("Quiet", (BaseException,), {})
        builtins.isinstance = lambda *a: True
        def double(x):
            return 0
        """,
        MBPP,
        0.0,
    ),
    a(
        "assert hack",
        "asserts read from solution.py with ast",
        LOOKUP_TABLE_FROM.format(source="learn(open('solution.py').read())"),
        MBPP,
        0.0,
    ),
    a(
        "assert hack",
        "asserts read from frames, gc and code objects",
        LOOKUP_TABLE_FROM.format(
            source="""
    for obj in gc.get_objects():
        if isinstance(obj, str) and "assert" in obj:
            learn(obj)
        elif type(obj).__name__ == "code":
            for const in obj.co_consts:
                if isinstance(const, str):
                    learn(const)
    frame = sys._getframe()
    while frame is not None:
        for value in list(frame.f_globals.values()) + list(frame.f_locals.values()):
            if isinstance(value, str):
                learn(value)
        frame = frame.f_back"""
        ),
        MBPP,
        0.0,
    ),
    a(
        "assert hack",
        "asserts read from the checker's files and /proc",
        LOOKUP_TABLE_FROM.format(
            source="""
    for pattern in ("/tmp/rlvr-code-*/*/solution.py", "/proc/*/cwd/solution.py", "/proc/*/cmdline"):
        for path in glob.glob(pattern):
            try:
                learn(open(path, errors="replace").read().replace("\\0", "\\n"))
            except OSError:
                pass"""
        ),
        MBPP,
        0.0,
    ),
    a(
        "assert hack",
        "StopIteration ends the tests' map() early",
        "def double(x):\n    raise StopIteration",
        {"test": ["assert all(got == want for got, want in zip(map(double, [2, 5]), [4, 10]))"]},
        0.0,
    ),
    a("assert hack", "a value nested too deeply to send", NESTED.format(depth=100000), MBPP, 0.0),
    # 8. SysV IPC: denied (it bypasses RLIMIT_AS and, in basic mode, outlives the run)
    a(
        "SysV IPC",
        "shmget/shmat 64 MB segments, semget, msgget",
        """
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        libc.shmat.restype = ctypes.c_void_p
        worked = 0
        for _ in range(8):
            shm = libc.shmget(0, 64 << 20, 0o1666)
            if shm >= 0:
                worked += 1
                addr = libc.shmat(shm, None, 0)
                if addr not in (None, ctypes.c_void_p(-1).value):
                    ctypes.memset(addr, 1, 64 << 20)
        worked += libc.semget(0, 1, 0o1666) >= 0
        worked += libc.msgget(0, 0o1666) >= 0
        print(worked)
        """,
        ZERO,
        1.0,
    ),
    # 9. host Unix sockets (path and abstract) through a socketpair's socket
    a(
        "host Unix socket",
        "sendto, connect and sendmsg with an address",
        """
        import socket
        worked = 0
        for address in ({path!r}, "\\0" + {abstract!r}):
            a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
            for attempt in (lambda: a.sendto(b"x", address), lambda: a.sendmsg([b"x"], [], 0, address),
                            lambda: (a.connect(address), a.send(b"x"))):
                try:
                    attempt()
                    worked += 1
                except OSError:
                    pass
        print(worked)
        """,
        ZERO,
        1.0,
    ),
    # what outlives the program: processes, files in the host's shared directories (basic mode)
    a(
        "survivor",
        "files in /tmp, /var/tmp and /dev/shm from a program still serving calls",
        """
        import os
        for base in ("/tmp", "/var/tmp", "/dev/shm"):  # no /var/tmp in namespaces mode
            if os.path.isdir(base):
                open(os.path.join(base, "left-{token}"), "w").write("x")
        def double(x):
            return 2 * x
        """,
        MBPP,
        1.0,
    ),
    a(
        "survivor",
        "files in world-writable folders inside /tmp (the test's socket folder is one)",
        """
        import os
        for base in ("/tmp", "/var/tmp", "/dev/shm"):
            for folder, subfolders, _ in os.walk(base):
                try:
                    open(os.path.join(folder, "left-{token}"), "w").write("x")
                    os.makedirs(os.path.join(folder, "dir-{token}", "sub"))
                except OSError:
                    pass
        print(int(input()) * 2)
        """,
        DOUBLE,
        1.0,
    ),
    a("survivor", "setsid double fork", SETSID_DAEMON + "print(0)", DOUBLE, 0.0),
    a(
        "survivor",
        "fork bomb",
        """
        import os, time
        while True:
            try:
                if os.fork() == 0:
                    os.execv("/bin/sleep", ["sleep", "{token}"])
            except OSError:
                time.sleep(0.01)
        """,
        DOUBLE,
        0.0,
    ),
]


@pytest.fixture
def host_sockets(tmp_path):
    """A datagram Unix socket at a path anyone may write to, and an abstract one."""
    folder = tempfile.mkdtemp(dir="/tmp")
    os.chmod(folder, 0o777)
    path = os.path.join(folder, "host.sock")
    abstract = f"rlvr-code-test-{secrets.token_hex(6)}"
    by_path, by_name = (
        socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM),
        socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM),
    )
    by_path.bind(path)
    os.chmod(path, 0o777)
    by_name.bind("\0" + abstract)
    for s in (by_path, by_name):
        s.setblocking(False)
    yield {"path": path, "abstract": abstract}, (by_path, by_name)
    by_path.close()
    by_name.close()
    os.unlink(path)
    os.rmdir(folder)


def sysv_objects() -> dict[str, list[str]]:
    out = {}
    for kind in ("shm", "sem", "msg"):
        with open(f"/proc/sysvipc/{kind}") as f:
            out[kind] = f.read().splitlines()[1:]
    return out


def shared_memory_mb() -> float:
    """The host's shared memory in use (tmpfs, SysV and POSIX shm): what a run could leave."""
    with open("/proc/meminfo") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("Shmem:")) / 1024


def files_of_run_uids() -> list[str]:
    """Entries of a run uid in the shared writable directories, in them and in their world-writable folders."""
    left, pending = [], [base for base in SHARED_WRITABLE if os.path.isdir(base)]
    while pending:
        base = pending.pop()
        for name in os.listdir(base):
            path = os.path.join(base, name)
            try:
                st = os.lstat(path)
            except OSError:
                continue
            if st.st_uid >= RUN_UID_BASE:
                left.append(path)
            elif os.path.isdir(path) and not os.path.islink(path) and st.st_mode & 0o003 == 0o003:
                pending.append(path)
    return left


def our_temp_dirs() -> list[str]:
    return sorted(
        {
            *glob.glob(f"/tmp/rlvr-code-{os.getpid()}-*"),
            *glob.glob(f"{tempfile.gettempdir()}/rlvr-code-{os.getpid()}-*"),
        }
    )


@pytest.mark.parametrize("attack", ATTACKS, ids=[attack.id for attack in ATTACKS])
def test_attack(attack, isolation, host_sockets):
    mode, python = isolation
    names, listeners = host_sockets
    token = f"305.{secrets.randbelow(10**6)}"
    program = attack.program.replace("{token}", token).replace("{path!r}", repr(names["path"]))
    program = program.replace("{abstract!r}", repr(names["abstract"]))
    scorer = CodeTestsScorer(CodeTestsOptions(time_limit_s=2.0, total_time_s=8.0, isolation=mode, python=python or ""))
    before, shm_before = sysv_objects(), shared_memory_mb()
    score = scorer(prompt="p", completion=f"{FENCE}python\n{program}\n{FENCE}", example=attack.tests)
    assert score == attack.score
    assert survivors(token, wait_s=2.0) == []
    assert our_temp_dirs() == [] and files_of_run_uids() == []
    assert sysv_objects() == before
    assert shared_memory_mb() - shm_before < 128  # bounded: other jobs on the host move it a little
    for listener in listeners:
        with pytest.raises(BlockingIOError):
            listener.recv(16)
    assert host_can_fork()
