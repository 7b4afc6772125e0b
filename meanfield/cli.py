"""The `meanfield` command line (also `python -m meanfield`).

    meanfield info                       versions and devices
    meanfield study NAME [options]       run a study (see `meanfield study --help`)
    meanfield plot DIR                   redraw a study folder's figures from its results.json
    meanfield canary                     compiled hot paths against op by op, at large widths

Bad input gets one line on stderr naming the argument and exit code 2; a JAX release
known to compute wrong results is refused the same way (`meanfield.runtime.releases`); a study
whose self-check finds a miscompiled grid point stops with one line and exit code 3.
"""

import argparse
import math
import os
import platform
import re
import sys
import time
from collections import deque
from collections.abc import Iterable
from importlib import metadata

from .harness.args import int_list
from .harness.options import add_common_arguments, add_release_override
from .studies import STUDIES, SelfCheckError, StudyInputError, help_line, study_options


class _Parser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are a single line (and exit code 2), and which
    takes no abbreviated option names (`--see` is not `--seeds`); its subparsers too."""

    def __init__(self, *args, **kwargs):
        kwargs["allow_abbrev"] = False
        super().__init__(*args, **kwargs)

    def error(self, message):
        from .harness.options import one_line_usage_error

        self.exit(2, f"{self.prog}: error: {one_line_usage_error(message)}\n")


def _version(package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "not installed"


def precision_lines(api_x64: bool) -> list[str]:
    """What precision the studies compute in (their defaults, `--x64`/`--no-x64` to change
    it), and what the Python API gets here (JAX's switch, off unless set)."""
    by = {True: [], False: []}
    for name, module in STUDIES.items():
        by[bool(getattr(module, "DEFAULT_X64", False))].append(name)
    if not by[False]:
        studies = "float64 (every study)"
    elif not by[True]:
        studies = "float32 (every study)"
    else:
        studies = f"float64, except {', '.join(by[False])} (float32)"
    return [
        f"  precision  studies: {studies}; --x64 / --no-x64 to change",
        "             (response simulates in float32; its theory and fits are float64)",
        f"             Python API here: {'float64' if api_x64 else 'float32'} "
        f"(jax_enable_x64 {'on' if api_x64 else 'off'})",
    ]


def info() -> str:
    """Versions of meanfield and its dependencies, and the devices JAX sees."""
    import jax

    from ._version import __version__

    lines = [f"meanfield {__version__} (python {platform.python_version()})"]
    for pkg in ("jax", "jaxlib", "diffrax", "equinox", "optax", "lineax", "matplotlib"):
        lines.append(f"  {pkg:<11}{_version(pkg)}")
    lines.append(f"  backend    {jax.default_backend()}")
    lines += precision_lines(jax.config.read("jax_enable_x64"))
    for dev in jax.devices():
        lines.append(f"  device     {dev.platform}:{dev.id} {dev.device_kind}")
    return "\n".join(lines)


def canary_command(args) -> int:
    """`meanfield canary`: one line per probe and width, a verdict, exit code 1 on a failure."""
    import json

    import jax

    from . import canary
    from .runtime.releases import installed, known_bad

    # refused before the run, not after it (issue 75): a width XLA cannot allocate, and a
    # --json that cannot be written
    bad = [n for n in args.sizes or () if not 1 <= n <= canary.MAX_SIZE]
    if bad:
        print(f"meanfield canary: error: --sizes: widths in 1..{canary.MAX_SIZE}, got {bad}",
              file=sys.stderr)  # fmt: skip
        return 2
    if args.json:
        import os

        folder = os.path.dirname(os.path.abspath(args.json))
        if os.path.isdir(args.json) or not os.path.isdir(folder):
            print(f"meanfield canary: error: --json: {args.json!r} is not a file in an existing "
                  "folder", file=sys.stderr)  # fmt: skip
            return 2
    jax.config.update("jax_enable_x64", not args.float32)
    probes = canary.PROBES
    if args.probes:
        words = [w.strip().lower() for w in args.probes.split(",") if w.strip()]
        probes = tuple(p for p in probes if any(w in p.name.lower() for w in words))
        if not probes:
            print(f"meanfield canary: error: --probes: no probe matches {args.probes!r}",
                  file=sys.stderr)  # fmt: skip
            return 2
    v = installed()
    print(f"meanfield canary: jax {v['jax']}, jaxlib {v['jaxlib']}, "
          f"{jax.default_backend()}, {'float32' if args.float32 else 'float64'}")  # fmt: skip

    sizes = args.sizes or canary.SIZES
    total, done, start = len(probes) * len(sizes), [], time.perf_counter()
    print(f"meanfield canary: {total} comparisons ({len(probes)} probes × {len(sizes)} "
          "widths)", flush=True)  # fmt: skip

    def report(r):
        done.append(r)
        mark = "ok  " if r.ok else "FAIL"
        spent = time.perf_counter() - start
        left = spent / len(done) * (total - len(done))
        print(f"  [{len(done):>{len(str(total))}}/{total}] {mark} {r.probe:<58} width "
              f"{r.size:>5}: compiled vs op by op {r.difference:.1e} (round-off bound "
              f"{r.tolerance:g}); {spent:.0f} s, about {left:.0f} s left", flush=True)  # fmt: skip

    results = canary.run_canary(sizes, probes=probes, report=report)
    failed = [r for r in results if not r.ok]
    if args.json:
        rows = [
            {**r.__dict__, "difference": r.difference if math.isfinite(r.difference) else None,
             "ok": r.ok}
            for r in results
        ]  # fmt: skip
        with open(args.json, "w") as f:
            json.dump({"versions": v, "backend": jax.default_backend(), "results": rows}, f,
                      indent=1)  # fmt: skip
    if failed:
        names = sorted({r.probe for r in failed})
        bad = known_bad()
        hint = f" (a known-bad release: {bad.package} {bad.version})" if bad else ""
        print(f"meanfield canary: {len(failed)} of {len(results)} comparisons FAILED{hint}: "
              + "; ".join(names))  # fmt: skip
        return 1
    print(f"meanfield canary: all {len(results)} comparisons agree to round-off")
    return 0


def named_study(argv: list[str]) -> str | None:
    """The study a command line `meanfield [--compile-cache DIR] study NAME ...` names, or
    None (another command, no name, an unknown one)."""
    i = 0
    while i < len(argv) and argv[i].startswith("-"):
        i += 2 if argv[i] == "--compile-cache" else 1
    if i >= len(argv) or argv[i] != "study":
        return None
    name = next((t for t in argv[i + 1 :] if not t.startswith("-")), None)
    return name if name in STUDIES else None


def formats_list(text: str) -> tuple[str, ...]:
    """`--format`: comma-separated figure formats, each one `figure_export` writes."""
    from .io.plotting import EXPORT_FORMATS  # (matplotlib is not imported here)

    words = tuple(w.strip().lower().lstrip(".") for w in text.split(",") if w.strip())
    bad = [w for w in words if w not in EXPORT_FORMATS]
    if not words or bad:
        raise argparse.ArgumentTypeError(
            f"one or more of {', '.join(EXPORT_FORMATS)}, got {text!r}"
        )
    return words


def bounded(kind, low, high):
    """An argument type: a `kind` number in [low, high]."""

    def read(text: str):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"a number in [{low}, {high}], got {text!r}") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"a number in [{low}, {high}], got {text!r}")
        return value

    return read


def build_parser(studies: Iterable[str] | None = None) -> argparse.ArgumentParser:
    """The command line's parser: every study's line, and the options of the studies
    `studies` (default: every study; `main` asks for the one its command line names).
    Both are read without JAX (each study's package front and its `options.py`), so that
    `--help` and a refusal of the command line answer at once."""
    parser = _Parser(
        prog="meanfield",
        description="Deep ResNets and their large-depth limits: studies and utilities.",
    )
    parser.add_argument(
        "--compile-cache",
        metavar="DIR",
        help="persistent JAX compilation cache folder, or 'off' (also none, 0, false) "
        "(default: $MEANFIELD_COMPILE_CACHE, else ~/.cache/meanfield/jax); programs go to "
        "a subfolder per CPU model and features and jaxlib release",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    info_parser = sub.add_parser("info", help="print versions and the devices JAX sees")
    add_release_override(info_parser)
    canary = sub.add_parser(
        "canary",
        help="compare every compiled hot path with the same function run op by op at widths "
        "that cross the compiler's tiling thresholds (exit code 1 on a difference)",
    )
    canary.add_argument(
        "--sizes", type=int_list, default=None,
        help="widths (default: 2000,4096,4097,8192)",
    )  # fmt: skip
    canary.add_argument(
        "--probes", default=None,
        help="only the probes whose name contains one of these comma-separated words",
    )  # fmt: skip
    canary.add_argument(
        "--float32", action="store_true", help="in float32 (default: float64, as the studies)"
    )
    canary.add_argument("--json", metavar="PATH", help="also write the results to PATH as JSON")
    plot = sub.add_parser(
        "plot", help="redraw every figure of a study folder from its results.json alone"
    )
    plot.add_argument("dir", metavar="DIR", help="a study's output folder")
    plot.add_argument(
        "--format", type=formats_list, default=(), metavar="FORMATS",
        help="also write each figure as these, comma-separated: pdf, svg, eps (the PNG "
        "always); PDF and EPS keep their text as text",
    )  # fmt: skip
    plot.add_argument(
        "--dpi",
        type=bounded(int, 50, 1200),
        help="dots per inch (default: 150, or a figure's own where higher)",
    )
    plot.add_argument(
        "--width-in", type=bounded(float, 2.0, 40.0), metavar="W",
        help="no figure wider than W inches, its panels re-flowed into more rows and its "
        "text kept at its size (default 7, a page's text width)",
    )  # fmt: skip
    plot.add_argument(
        "--panel", metavar="TEXT",
        help="also write alone, as FIGURE_panelK.png (and in --format), each panel whose "
        "title holds TEXT (any case), or panel number TEXT (1 the first)",
    )  # fmt: skip
    study = sub.add_parser("study", help="run a study; writes DIR/results.json and figures")
    names = study.add_subparsers(dest="study", metavar="NAME")
    names.required = True
    wanted = set(STUDIES if studies is None else studies)
    for name in STUDIES:
        line = help_line(name)
        p = names.add_parser(name, help=line, description=line)
        if name in wanted:
            options = study_options(name)
            add_common_arguments(p, options, name)
            options.add_arguments(p)
    return parser


# a list whose first value is negative, such as `-1,0.5`: argparse takes a token that
# starts with '-' and is not a single number for an option ("expected one argument")
_NEGATIVE_LIST = re.compile(r"^-\.?\d[^=]*,")


def join_negative_lists(argv: list[str]) -> list[str]:
    """`--beta -1,1` as `--beta=-1,1`, so that argparse reads the list as the value."""
    out: list[str] = []
    for token in argv:
        previous = out[-1] if out else ""
        if _NEGATIVE_LIST.match(token) and previous.startswith("--") and "=" not in previous:
            out[-1] = f"{previous}={token}"
        else:
            out.append(token)
    return out


def main(argv: list[str] | None = None) -> int:
    given = sys.argv[1:] if argv is None else list(argv)
    named = named_study(given)
    parser = build_parser([named] if named else [])
    args = parser.parse_args(join_negative_lists(given))
    if argv is None and args.command in ("study", "canary"):  # the program, not a caller's
        from .runtime.log_filter import filter_stderr

        filter_stderr()  # XLA's logs that tell a user nothing (`runtime.log_filter`)
    if args.command in ("info", "study"):
        from .runtime.releases import KnownBadReleaseError, check_release

        try:
            check_release(allow=args.allow_known_bad_jax)
        except KnownBadReleaseError as err:
            where = "info" if args.command == "info" else f"study {args.study}"
            print(f"meanfield {where}: error: {err}", file=sys.stderr)
            return 2
    if args.command == "info":
        print(info())
        return 0
    if args.command == "canary":
        return canary_command(args)
    if args.command == "plot":
        from .studies import replot

        export = {"formats": args.format, "dpi": args.dpi, "panel": args.panel,
                  "width_in": args.width_in}  # fmt: skip
        if args.panel is not None and not args.panel.strip():
            print("meanfield plot: error: --panel: a panel's title (or part of it), or its "
                  "number; got ''", file=sys.stderr)  # fmt: skip
            return 2
        seen: list = []
        try:
            written = replot(args.dir, export, seen=seen)
        except StudyInputError as err:
            print(f"meanfield plot: error: {err}", file=sys.stderr)
            return 2
        if args.panel is not None and not any("_panel" in p.stem for p in written):
            print(f"meanfield plot: error: --panel: no panel's title holds {args.panel!r} "
                  "(nor is it a panel's number); the panels:\n  " + "\n  ".join(seen),
                  file=sys.stderr)  # fmt: skip
            return 2
        print(f"meanfield plot: redrew {len(written)} figure(s) in {args.dir}: "
              + ", ".join(p.name for p in written))  # fmt: skip
        return 0
    from .harness.options import distributed_settings

    where = f"meanfield study {args.study}"
    try:
        settings = distributed_settings(args)
    except StudyInputError as err:
        print(f"{where}: error: {err}", file=sys.stderr)
        return 2
    if settings is None:
        return _study_command(parser, args, where)
    from .runtime import distribution

    index, count = settings["process_id"], settings["num_processes"]
    if index is None and args.distributed:  # a cluster's rank (SLURM, Open MPI)
        cluster = distribution.cluster_settings() or {}
        index, count = cluster.get("process_id"), cluster.get("num_processes")
    if index:  # a follower: its runtime aborts it, the coordinator gone (`_supervise`)
        if not distribution.supervised():
            return _supervise(given, where, index, count, args)
        distribution.watch_supervisor()  # and it ends with its supervisor
    # several processes: each says who it is; an error or a stop ends it at once (the
    # runtime's shutdown would wait for the others), which the others see within seconds
    import jax

    try:
        procs = distribution.start_processes(**settings)
    except Exception as err:  # noqa: BLE001 - no coordinator given or found, none answers
        first = (str(err).strip().splitlines() or [type(err).__name__])[0]
        print(f"{where}: error: --distributed: cannot join the processes: {first}",
              file=sys.stderr)  # fmt: skip
        return 2
    procs.where = where
    detected = distribution.cluster_detected()
    print(f"{where}: process {procs.index} of {procs.count}"
          + (f" ({detected} detected)" if detected else "")
          + f", {len(jax.local_devices())} device(s) here; process 0 writes the folder",
          flush=True)  # fmt: skip
    with distribution.on_devices(jax.local_devices()):
        code = _study_command(parser, args, where, lock=procs.index == 0)
    if code != 0:
        procs.abort(f"exit status {code}")
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    return code


def _supervise(argv: list[str], where: str, index: int, count, args) -> int:
    """Run this follower (process `index` of `count`) as a child, `python -m meanfield
    ARGV` with `MEANFIELD_SUPERVISED` set, and return its exit status. Its stdout is this
    process's; its stderr is relayed about a second late, piece by piece (a line, or a
    progress bar's update), so that where the runtime ends it with its fatal report (the
    coordinator gone) the report is dropped and one line said instead: what the child
    computed (its `COMPUTED_MARK` lines, never relayed), where the points are, `--resume`;
    exit status 1. SIGINT and SIGTERM are sent on to the child; a child ended by another
    signal ends this with 128 + its number, as a shell reports it."""
    import signal
    import subprocess
    from pathlib import Path

    from .runtime.distribution import SUPERVISED_VARIABLE
    from .studies import resolve_out

    env = dict(os.environ, **{SUPERVISED_VARIABLE: "1"})
    root = str(Path(__file__).resolve().parents[1])  # the child runs this same meanfield
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
    # its stdin: a pipe that closes as this process ends, killed too (`watch_supervisor`)
    child = subprocess.Popen([sys.executable, "-m", "meanfield", *argv], env=env,
                             stdin=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip
    assert child.stderr is not None

    def forward(signum, frame):
        if child.returncode is None:
            child.send_signal(signum)

    previous = {s: signal.signal(s, forward) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        computed, fatal = _relay_stderr(child.stderr.fileno())
        code = child.wait()
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
    if fatal and code != 0:
        try:
            resolve_out(args)
        except Exception:  # noqa: BLE001 - the child refused it already
            pass
        print(f"{where}: process {index} of {count} stops: the coordinator (process 0) is "
              f"gone; it computed {computed} point(s); the finished points stay in process "
              f"0's folder {args.out}: run the same commands with --resume",
              file=sys.stderr, flush=True)  # fmt: skip
        return 1
    return code if code >= 0 else 128 - code


def _relay_stderr(fd: int) -> tuple[int, bool]:
    """Relay the supervised child's stderr (`fd`, until it closes; `_supervise`) about a
    second late, piece by piece, reading its `COMPUTED_MARK` lines (never relayed); from
    the first line of the runtime's fatal report on, nothing more is relayed, and the lines
    held back that belong to it are dropped. Returns (the points it computed, whether the
    report came)."""
    import select

    from .runtime.distribution import COMPUTED_MARK, FATAL_MARKERS

    hold = 1.0  # seconds: the report's first lines come within milliseconds of its last
    runtime_log = re.compile(r"^[IWEF]\d{4} \d\d:\d\d:\d\d")  # absl's, as the report's
    rest, computed, fatal = b"", 0, False
    held: deque[tuple[float, bytes]] = deque()
    while True:
        while held and (fatal or held[0][0] <= time.monotonic()):
            _relay(held.popleft()[1])
        wait = max(0.0, held[0][0] - time.monotonic()) if held else None
        if not select.select([fd], [], [], wait)[0]:
            continue
        chunk = os.read(fd, 1 << 16)
        pieces = re.split(rb"(?<=[\r\n])", rest + chunk)
        rest = pieces.pop() if chunk else b""
        for piece in filter(None, pieces):
            text = piece.decode(errors="replace")
            if text.startswith(COMPUTED_MARK):
                digits = text[len(COMPUTED_MARK) :].strip()
                computed = int(digits) if digits.isdigit() else computed
            elif not fatal and any(m in text for m in FATAL_MARKERS):
                fatal = True  # dropped: the report from its first line, the child's line
                held = _before_report(held, runtime_log)
            elif not fatal:
                held.append((time.monotonic() + hold, piece))
        if not chunk:
            break
    while held:
        _relay(held.popleft()[1])
    return computed, fatal


def _before_report(
    held: deque[tuple[float, bytes]], runtime_log: re.Pattern
) -> deque[tuple[float, bytes]]:
    """The pieces held back (`_relay_stderr`) that came before the runtime's fatal report
    (its first absl log line on), without the child's own line that the coordinator is
    gone."""
    kept: deque[tuple[float, bytes]] = deque()
    for due, line in held:
        shown = line.decode(errors="replace")
        if runtime_log.match(shown) and "cpu_aot" not in shown:
            break
        if "stops: the coordinator (process 0)" not in shown:
            kept.append((due, line))
    return kept


def _relay(piece: bytes) -> None:
    """Write `piece` to stderr: the bytes as they came; text where stderr is replaced."""
    stream = getattr(sys.stderr, "buffer", None)
    if stream is None:
        sys.stderr.write(piece.decode(errors="replace"))
    else:
        stream.write(piece)
    sys.stderr.flush()


def _study_command(parser, args, where: str, *, lock: bool = True) -> int:
    from .harness.folder import release_all
    from .harness.launcher import launch, prepare

    module = STUDIES[args.study]
    try:
        prepare(module, args, lock=lock)  # a folder held by another run: refused first
    except StudyInputError as err:
        print(f"{where}: error: {err}", file=sys.stderr)
        return 2
    from .runtime.compilation import enable_compilation_cache

    try:
        # programs compiled in under a second (the self-check's op-by-op operations, about
        # 1,200 in a transfer run) are not worth a disk read, and jaxlib 0.10.1 logs a
        # spurious SIGILL warning for every program read back (runtime.compilation)
        enable_compilation_cache(args.compile_cache, min_compile_seconds=1.0)
    except ValueError as err:
        import os

        from .runtime.compilation import ENV_VAR

        # the folder named by the variable where the option is left out
        named = args.compile_cache is None and ENV_VAR in os.environ
        given = ENV_VAR if named else "--compile-cache"
        parser.error(f"{given}: {err}")

    from .runtime.distribution import active
    from .runtime.interrupt import Interrupted, end_process, message, stop_on_signals

    def at_once(signum: int) -> None:
        """One process: its line, then the end, from the signal's handler (the main thread
        is not unwound out of a compile that jaxlib's thread goes on with: a segfault, or
        Python's shutdown waiting a minute for it; runtime.interrupt)."""
        if active() is None:  # (several processes: `main` tells the others, then ends)
            from .harness.args import name_stopped_user_code

            name_stopped_user_code()  # the user's file it was in, if any
            print(message(where, signum, args.out), file=sys.stderr)
            release_all()
            end_process(128 + signum)

    try:
        launch(module, args, around=stop_on_signals(where, args.out, at_once=at_once))
    except Interrupted as stop:  # Ctrl-C or SIGTERM: one line, the finished points kept
        from .runtime.distribution import follower_stopped  # process 0 holds the folder

        line = follower_stopped(where, str(stop), args.out)
        print(line or message(where, stop.signum, args.out), file=sys.stderr)
        if active() is None:  # raised where the handler could not end it (on the way out)
            release_all()
            end_process(stop.exit_code)
        return stop.exit_code
    except StudyInputError as err:
        print(f"meanfield study {args.study}: error: {err}", file=sys.stderr)
        return 2
    except SelfCheckError as err:
        print(f"meanfield study {args.study}: error: {err}", file=sys.stderr)
        return 3
    except OSError as err:  # the folder's disk full, its mount gone, ...: one line
        where = f" ({err.filename})" if err.filename else ""
        print(
            f"meanfield study {args.study}: error: --out: cannot write: {err.strerror or err}"
            f"{where}",
            file=sys.stderr,
        )
        return 2
    return 0
