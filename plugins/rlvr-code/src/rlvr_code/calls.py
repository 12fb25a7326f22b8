"""Assert-style tests across two sandboxes: the tests call the program's functions by message.

The *checker* sandbox runs the tests (setup code, asserts, HumanEval's ``check``) with each
name they take from the program bound to a :class:`Remote`; the *program* sandbox runs the
program and then :func:`serve`\\ s those calls. A call's arguments and its return value cross
as data (:func:`encode` / :func:`decode`: plain builtins only), so the comparisons run in
the checker's interpreter on values the program cannot give a method of its own (no
``__eq__`` that is always true), and the tests' source and expected values never reach the
program's process, files or memory.

This file is run as it is inside both sandboxes (``python -I -S -c <this file> serve`` or
``... check NAME ...``): standard library only, and no import of the rest of the package.
In each sandbox file descriptor 3 reads and 4 writes: the checker writes calls on its 4,
which the program reads on its 3; the answers go back the other way.
"""

from __future__ import annotations

import builtins
import collections
import json
import os
import sys

READ_FD, WRITE_FD = 3, 4
MAX_MESSAGE = 1 << 30  # bytes of one call or answer: in practice memory_mb bounds it first
THREAD_STACK = 8 << 20  # a thread's stack unless the program asks (threading.stack_size): a default ulimit's
CODEC_RECURSION = 10_000  # nesting levels x frames: fits the 256 MB main-thread stack
EXIT_UNSENDABLE = 3  # the checker's status when the tests pass an argument that is not plain data
TRAFFIC_MARK = "rlvr-code-channel"  # the checker's last stderr line: TRAFFIC_MARK calls bytes


_MUTABLE = (list, dict, set, bytearray, collections.deque)
_SCALARS = (bool, int, float, str)
_ITEMS = type({}.items())
_VIEWS = {type({}.keys()): "K", type({}.values()): "V", _ITEMS: "I"}
_ENDS_ITERATION = (StopIteration, StopAsyncIteration)  # would end the tests' map(f, ...) early: a failure


class Unsendable(TypeError):
    """A value that is not plain data (see :func:`encode`)."""


def encode(value, _memo=None):
    """Plain data as JSON-ready values: ``None``, ``bool``, ``int``, ``float``, ``str`` as
    themselves; ``bytes``, ``bytearray``, ``complex``, ``list``, ``tuple``, ``set``,
    ``frozenset``, ``dict``, ``range``, a dict's ``keys()``/``values()``/``items()``,
    ``collections.deque``, ``fractions.Fraction``, ``decimal.Decimal`` and iterators (a
    generator, ``map``, ``itertools`` objects, any object with ``__next__`` and ``__iter__``:
    its items) as ``[tag, ...]``. The type test is exact (``type(v) is int``): a subclass is
    refused, except the dict subclasses of ``collections`` (sent as a dict) and named tuples
    (sent as a tuple). A ``list``, ``dict``, ``set``, ``bytearray`` or ``deque`` met again
    in the same value is sent as ``["@", n]``, the n-th of them met (so an object passed
    twice, or a list that holds itself, is one object on the other side too).

    >>> encode([1, (2.5, "x"), {b"k": None}, {3}])
    ['l', 1, ['t', 2.5, 'x'], ['d', ['b', '6b'], None], ['s', 3]]
    >>> xs = [1]
    >>> encode((xs, xs))
    ['t', ['l', 1], ['@', 0]]
    """
    kind = type(value)
    if value is None or kind in _SCALARS:
        return value
    if _memo is None:
        _memo = {}
    if kind in _MUTABLE:
        seen = _memo.get(id(value))
        if seen is not None:
            return ["@", seen[0]]
        _memo[id(value)] = (len(_memo), value)  # the value is kept: an id is unique only while it lives
    if kind is list:
        if all(type(v) in _SCALARS or v is None for v in value):
            return ["l", *value]
        return ["l", *[encode(v, _memo) for v in value]]
    if kind is bytes:
        return ["b", value.hex()]
    if kind is bytearray:
        return ["B", value.hex()]
    if kind is range:
        return ["r", value.start, value.stop, value.step]
    if kind in _VIEWS:
        return [
            _VIEWS[kind],
            *[encode(part, _memo) for item in value for part in (item if kind is _ITEMS else (item,))],
        ]
    if kind is collections.deque:
        return ["q", value.maxlen, *[encode(v, _memo) for v in value]]
    if kind is getattr(sys.modules.get("fractions"), "Fraction", None):
        return ["F", value.numerator, value.denominator]
    if kind is getattr(sys.modules.get("decimal"), "Decimal", None):
        return ["D", str(value)]
    if kind is complex:
        return ["c", value.real, value.imag]
    if kind is tuple or (isinstance(value, tuple) and kind.__bases__ == (tuple,) and hasattr(kind, "_fields")):
        return ["t", *[encode(v, _memo) for v in value]]
    if kind in (set, frozenset):
        return ["s" if kind is set else "f", *[encode(v, _memo) for v in value]]
    if kind is dict or (isinstance(value, dict) and kind.__module__ == "collections"):
        return ["d", *[encode(part, _memo) for item in value.items() for part in item]]
    if hasattr(kind, "__next__") and hasattr(kind, "__iter__"):
        return ["i", *[encode(v, _memo) for v in value]]
    raise Unsendable(f"{kind.__module__}.{kind.__qualname__} is not plain data")


def decode(data, _refs=None):
    """The inverse of :func:`encode`, strict: anything else raises ``ValueError``. An
    iterator comes back as an iterator over its items.

    >>> decode(['l', 1, ['t', 2.5, 'x'], ['d', ['b', '6b'], None], ['s', 3]])
    [1, (2.5, 'x'), {b'k': None}, {3}]
    >>> a, b = decode(['t', ['l', 1], ['@', 0]])
    >>> a is b
    True
    """
    if data is None or type(data) in _SCALARS:
        return data
    if type(data) is not list or not data or data[0] not in _DECODERS:
        raise ValueError(f"not an encoded value: {str(data)[:80]}")
    if _refs is None:
        _refs = []
    return _DECODERS[data[0]](data[1:], _refs)


def _ref(items, refs):
    if len(items) != 1 or type(items[0]) is not int or not 0 <= items[0] < len(refs):
        raise ValueError("a reference needs the index of an object met before")
    return refs[items[0]]


def _list(items, refs):
    out = []
    refs.append(out)
    out.extend([decode(v, refs) for v in items])
    return out


def _pairs(items, refs, out=None):
    if len(items) % 2:
        raise ValueError("a dict needs key, value pairs")
    out = {} if out is None else out
    for k, v in zip(items[::2], items[1::2]):
        key = decode(k, refs)
        out[key] = decode(v, refs)
    return out


def _dict(items, refs):
    out: dict = {}
    refs.append(out)
    return _pairs(items, refs, out)


def _set(items, refs):
    out: set = set()
    refs.append(out)
    out.update([decode(v, refs) for v in items])
    return out


def _bytes(items, refs=None):
    if len(items) != 1 or type(items[0]) is not str:
        raise ValueError("bytes need one hex string")
    return bytes.fromhex(items[0])


def _bytearray(items, refs):
    out = bytearray(_bytes(items))
    refs.append(out)
    return out


def _complex(items, refs):
    if len(items) != 2 or any(type(v) not in (int, float) for v in items):
        raise ValueError("a complex needs two numbers")
    return complex(*items)


def _range(items, refs):
    if len(items) != 3 or any(type(v) is not int for v in items) or not items[2]:
        raise ValueError("a range needs start, stop and a non-zero step")
    return range(*items)


def _deque(items, refs):
    if not items or not (items[0] is None or (type(items[0]) is int and items[0] >= len(items) - 1)):
        raise ValueError("a deque needs its maxlen (None or an int that holds its items) first")
    out: collections.deque = collections.deque((), items[0])
    refs.append(out)
    out.extend([decode(v, refs) for v in items[1:]])
    return out


def _fraction(items, refs):
    if len(items) != 2 or any(type(v) is not int for v in items) or items[1] <= 0:
        raise ValueError("a Fraction needs an int numerator and a positive int denominator")
    import fractions

    return fractions.Fraction(*items)


def _decimal(items, refs):
    import decimal

    if len(items) != 1 or type(items[0]) is not str:
        raise ValueError("a Decimal needs one string")
    try:
        return decimal.Decimal(items[0])
    except decimal.InvalidOperation:
        raise ValueError("not a Decimal") from None


_DECODERS = {
    "@": _ref,
    "b": _bytes,
    "B": _bytearray,
    "r": _range,
    "K": lambda items, refs: dict.fromkeys([decode(v, refs) for v in items]).keys(),
    "V": lambda items, refs: {k: decode(v, refs) for k, v in enumerate(items)}.values(),
    "I": lambda items, refs: _pairs(items, refs).items(),
    "q": _deque,
    "F": _fraction,
    "D": _decimal,
    "c": _complex,
    "l": _list,
    "t": lambda items, refs: tuple([decode(v, refs) for v in items]),
    "s": _set,
    "f": lambda items, refs: frozenset([decode(v, refs) for v in items]),
    "d": _dict,
    "i": lambda items, refs: iter([decode(v, refs) for v in items]),
}


def _send(stream, message) -> int:
    """Write one message; its size in bytes."""
    data = json.dumps(message, separators=(",", ":")).encode() + b"\n"
    stream.write(data)
    stream.flush()
    return len(data)


def _receive(stream, sizes=None):
    """One message, or None at the end of the stream (the other side is gone); its size is
    appended to ``sizes`` when given."""
    line = stream.readline(MAX_MESSAGE + 1)
    if not line:
        return None
    if len(line) > MAX_MESSAGE or not line.endswith(b"\n"):
        raise ValueError(f"a message over {MAX_MESSAGE} bytes")
    if sizes is not None:
        sizes.append(len(line))
    return json.loads(line)


FORK_FOR_FORKSERVER = """\
class _ForkForForkserver:
    # multiprocessing's forkserver (the default start method from Python 3.14) needs AF_UNIX
    # sockets, which the sandbox denies: once multiprocessing.context is imported, 'forkserver'
    # and the default context are 'fork'. Nothing is imported until the program imports it.
    def find_spec(self, name, path=None, target=None):
        if name != "multiprocessing.context":
            return None
        import sys
        from importlib.machinery import PathFinder
        sys.meta_path.remove(self)
        spec = PathFinder.find_spec(name, path)
        if spec is not None and spec.loader is not None:
            run = spec.loader.exec_module
            def exec_module(module):
                run(module)
                contexts = module._concrete_contexts
                contexts["forkserver"] = contexts["fork"]
                module._default_context = module.DefaultContext(contexts["fork"])
            spec.loader.exec_module = exec_module
        return spec
__import__("sys").meta_path.insert(0, _ForkForForkserver())
del _ForkForForkserver
"""
"""Run by both harnesses before the program (plain source: the stdin harness is a string)."""


def _start() -> None:
    """What both sides need: ``exit``/``quit`` (``-S`` skips the site module), 8 MB thread
    stacks (else glibc gives each thread ``RLIMIT_STACK``, 256 MB, of address space),
    integers of any size across the channel, and values nested as deeply as the tests'
    own ``==`` handles in one interpreter (the codec recurses once per level, and there are
    several frames per level)."""
    import _thread

    builtins.exit = builtins.quit = sys.exit
    _thread.stack_size(THREAD_STACK)
    sys.set_int_max_str_digits(0)
    sys.setrecursionlimit(max(sys.getrecursionlimit(), CODEC_RECURSION))
    exec(FORK_FOR_FORKSERVER, {})


# ---------------------------------------------------------------- program side

_KEPT: list = []


def serve(path: str = "solution.py") -> None:
    """Run the program as ``__main__``, then answer calls until the checker closes the channel,
    then exit: ``[name, (args, kwargs)]`` (encoded as one value, so an object passed twice
    stays one) gets ``["ok", value, args after the call]`` (a list, dict, set, bytearray or
    deque argument as it is after the call; others as ``None``), ``["raise", exception class
    name, its args or None, the (module, name) of each class of its MRO, its data
    attributes]`` (see :func:`_raised`) or ``["unsendable", why]``. The program's stdout and
    stderr go to ``/dev/null``: only the answers count, and a program that prints a lot must
    not fail on the output cap."""
    _start()
    sink = os.open(os.devnull, os.O_WRONLY)
    os.dup2(sink, 1)
    os.dup2(sink, 2)
    os.close(sink)
    main = type(sys)("__main__")  # the program is __main__, as in plain Python: what a process pool pickles
    main.__file__, main.__builtins__ = path, builtins  # by reference (__main__.f) is found in its workers
    _KEPT.append(sys.modules["__main__"])  # this file's own module stays alive under its new name
    sys.modules["__main__"] = main
    program = main.__dict__
    with open(path, encoding="utf-8") as f:
        code = compile(f.read(), path, "exec")
    sys.argv[:] = [path]
    exec(code, program)
    sys.stdout.flush()
    requests, answers = os.fdopen(READ_FD, "rb"), os.fdopen(WRITE_FD, "wb")
    while (call := _receive(requests)) is not None:
        name, payload = call
        args, kwargs = decode(payload)
        try:
            if name not in program:
                raise NameError(name)
            value = program[name](*args, **kwargs)
        except Exception as exc:
            _send(answers, _raised(exc))
            continue
        try:
            answer = ["ok", encode(value), encode([arg if type(arg) in _MUTABLE else None for arg in args])]
        except (Unsendable, RecursionError) as exc:
            answer = ["unsendable", f"{name} returned {str(exc)[:200]}"]
        except Exception as exc:  # a returned generator raised while its items were read: as it would in the tests
            answer = _raised(exc)
        _send(answers, answer)
    os._exit(0)  # the tests are done; threads the program left running do not keep it (or its keeper) waiting


def _raised(exc: Exception) -> list:
    """The answer for an exception: its class name, its ``args`` when they are data (tests
    that check ``str(e)`` or ``e.args``) else ``None``, the ``(module, name)`` of every class
    in its MRO (the checker raises the first one it has: ``json.JSONDecodeError`` itself when
    the tests imported ``json``, else ``ValueError``), and its attributes that are data."""
    classes = [[c.__module__, c.__qualname__] for c in type(exc).__mro__ if issubclass(c, BaseException)]
    try:
        state = encode({k: v for k, v in vars(exc).items() if type(k) is str and not k.startswith("_")})
    except (Unsendable, RecursionError, TypeError):
        state = None
    try:
        args = encode(tuple(exc.args))
    except (Unsendable, RecursionError):
        args = None
    return ["raise", type(exc).__name__, args, classes, state]


# ---------------------------------------------------------------- checker side


class ProgramFailed(Exception):
    """The program ended, or answered with something that is not plain data."""


class Remote:
    """A name the tests take from the program: calling it calls the program's function."""

    def __init__(self, name: str, channel: tuple) -> None:
        self.name, self._channel = name, channel

    def __repr__(self) -> str:
        return f"<the program's {self.name}>"

    def __call__(self, *args, **kwargs):
        answers, requests = self._channel
        try:
            message = [self.name, encode((args, kwargs))]
        except RecursionError:  # nesting the program may have built: its failure, never a masked row
            raise ProgramFailed(f"{self.name}: an argument nested too deeply to send") from None
        except Unsendable as exc:  # only the tests can make a value that is not data
            print(f"the tests call {self.name} with an argument that cannot be sent: {exc}", file=sys.stderr)
            sys.stderr.flush()
            os._exit(EXIT_UNSENDABLE)
        sizes = []
        try:
            sizes.append(_send(requests, message))
            answer = _receive(answers, sizes)
        except OSError as exc:  # EPIPE: the program is gone
            raise ProgramFailed(f"{self.name}: the program ended ({exc})") from None
        finally:
            TRAFFIC[0] += 1
            TRAFFIC[1] += sum(sizes)
        if answer is None:
            raise ProgramFailed(f"{self.name}: the program ended")
        kind, payload, *rest = answer
        if kind == "ok":
            value = decode(payload)
            _update_in_place(args, decode(rest[0]) if rest else None)
            return value
        if kind == "raise":
            raised = _exception_class(str(payload), rest[1] if len(rest) > 1 else None)
            if raised is not None:
                raise _rebuilt(raised, rest[0] if rest else None, rest[2] if len(rest) > 2 else None, self.name)
            raise ProgramFailed(f"{self.name} raised {str(payload)[:100]}")
        raise ProgramFailed(f"{self.name}: {str(payload)[:300]}")


TRAFFIC = [0, 0]
"""Calls made to the program and bytes sent both ways: the channel's cost is budgeted apart from the program's time."""


def _exception_class(name: str, classes) -> type | None:
    """The class to raise in the tests for an exception of the program: the first class of its MRO
    that is a builtin exception, or an exception class of a standard-library module the tests have
    imported; never the checker's own classes, never one that ends an iteration."""
    if type(classes) is not list:
        classes = [["builtins", name]]
    stdlib = getattr(sys, "stdlib_module_names", ())
    for entry in classes:
        if type(entry) is not list or len(entry) != 2 or not all(type(part) is str for part in entry):
            continue
        module, qualname = entry
        if module == "builtins":
            found = getattr(builtins, qualname, None)
        elif module.split(".")[0] in stdlib and module in sys.modules:
            found = sys.modules[module]
            for part in qualname.split("."):
                found = getattr(found, part, None)
        else:
            continue
        if isinstance(found, type) and issubclass(found, Exception) and not issubclass(found, _ENDS_ITERATION):
            return found
    return None


def _rebuilt(raised: type, args, state, name: str) -> Exception:
    """An instance of ``raised`` with the program's args (when they were data; set without
    calling ``__init__`` when it wants others: ``JSONDecodeError(msg, doc, pos)``) and its
    data attributes, else with a message naming the function."""
    try:
        args = decode(args) if args is not None else None
    except (ValueError, TypeError, RecursionError):
        args = None
    if type(args) is not tuple:
        args = (f"raised by the program's {name}",)
    try:
        exc = raised(*args)
    except Exception:
        exc = raised.__new__(raised, *args)
        exc.args = args
    try:
        attributes = decode(state) if state is not None else {}
    except (ValueError, TypeError, RecursionError):
        attributes = {}
    if type(attributes) is dict:
        for key, value in attributes.items():
            if type(key) is str and not key.startswith("_"):
                try:
                    setattr(exc, key, value)
                except Exception:
                    pass
    return exc


def _update_in_place(args: tuple, after) -> None:
    """Give the tests' own list, dict and set arguments what the program's copies hold after
    the call (a function that sorts its argument in place)."""
    if type(after) is not list or len(after) != len(args):
        raise ProgramFailed("the arguments after the call do not match the call")
    for arg, new in zip(args, after):
        if type(arg) in _MUTABLE and new is not None:
            if type(new) is not type(arg):
                raise ProgramFailed("an argument changed type in place")
            if type(arg) in (list, bytearray):
                arg[:] = new
            elif type(arg) is collections.deque:
                arg.clear()
                arg.extend(new)
            else:
                arg.clear()
                arg.update(new)


def _module(name: str):
    """A standard-library module the tests use without importing it (MBPP's ``math.isclose``
    relied on the solution's ``import math``): the checker's own; ``None`` if it cannot be
    imported here (the name is then unbound, as it would be in the program)."""
    try:
        return __import__(name)
    except ImportError:
        return None


def check(names: list[str], modules: list[str] = (), path: str = "solution.py") -> None:
    """Run the tests with ``names`` bound to the program and ``modules`` to the checker's own
    standard-library modules; exit 0 only if they run to their end."""
    import signal

    signal.signal(signal.SIGPIPE, signal.SIG_IGN)  # a program that is gone is an EPIPE, then a failure
    _start()
    channel = (os.fdopen(READ_FD, "rb"), os.fdopen(WRITE_FD, "wb"))
    tests = {"__name__": "__main__", "__builtins__": builtins, **{name: Remote(name, channel) for name in names}}
    tests.update((name, module) for name in modules if (module := _module(name)) is not None)
    try:
        with open(path, encoding="utf-8") as f:
            exec(compile(f.read(), "tests.py", "exec"), tests)
    except BaseException:
        import traceback

        traceback.print_exc()
        sys.stderr.flush()
        os._exit(1)
    sys.stdout.flush()
    print(f"\n{TRAFFIC_MARK} {TRAFFIC[0]} {TRAFFIC[1]}", file=sys.stderr, flush=True)
    os._exit(0)


if __name__ == "__main__" and len(sys.argv) > 1:
    if sys.argv[1] == "serve":
        serve()
    elif sys.argv[1] == "check":  # check NAME... [-- MODULE...]
        given = sys.argv[2:]
        split = given.index("--") if "--" in given else len(given)
        check(given[:split], given[split + 1 :])
