"""What every command shares: the app, option types, logging to stderr and error handling.

Results go to stdout, logs and progress to stderr. Every ``MtError`` becomes one line on stderr
and its exit code (``errors.py``); Ctrl-C and SIGTERM become exit 130 and a closed output pipe
exit 141, never a traceback.
"""

from __future__ import annotations

import contextlib
import functools
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Annotated, Any, TextIO, TypeVar, get_type_hints

import typer
from typer.models import OptionInfo

from mt_cli.config.sections import Config
from mt_cli.errors import EXIT_INTERRUPTED, InputError, MtError

app = typer.Typer(
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)

DEFAULT_RECIPE = "multi30k"
DEFAULT_RUN = Path(Config().run_dir)
EXIT_BROKEN_PIPE = 141  # 128 + SIGPIPE, what shell tools report when `| head` stops reading
F = TypeVar("F", bound=Callable)


def option(kind: Any, *names: str, help: str, **settings: Any) -> Any:
    """The annotation of a command option, on one line: Typer reads the option from it."""
    return Annotated[kind, typer.Option(*names, help=help, **settings)]


ConfigOption = option(
    str, "--config", "-c", help="YAML recipe: a path, or the name of a shipped one (multi30k, quick)."
)
SetOption = option(
    list[str] | None, "--set", "-s", help="Override a config key: section.key=value (repeatable)."
)
RunOption = option(Path, "--run", "-r", "--run-dir", help="Run directory of a trained model.")
OptionalRunOption = option(
    Path | None, "--run", "-r", "--run-dir", help="Run directory (default: the config's run_dir)."
)
CheckpointOption = option(
    str | None,
    "--checkpoint",
    help="Checkpoint file, or a name in RUN/checkpoints (best, last, average; default: best).",
)
DeviceOption = option(str, "--device", help="auto | cpu | cuda.")
# Decoding options: their values are checked once, by the rules of ``TranslateOptions``.
BeamOption = option(int | None, "--beam", "-b", help="Beam size (1 = greedy; default: the recipe's).")
LengthPenaltyOption = option(
    float | None,
    "--length-penalty",
    help="Length penalty alpha: a beam's score is log-prob / length ** alpha (default: the recipe's).",
)
JsonOption = option(bool, "--json", help="Print one JSON object instead of text.")


def log(message: str) -> None:
    """Progress and diagnostics: stderr, so that stdout holds only results."""
    typer.echo(message, err=True)


def warn(message: str) -> None:
    typer.echo(f"warning: {message}", err=True)


def fail(message: str, code: int) -> None:
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(code)


class Terminated(KeyboardInterrupt):
    """SIGTERM arrived: stopped as Ctrl-C stops a command (temporary outputs removed, exit 130)."""


def user_errors(command: F) -> F:
    """Turn what can go wrong below a command into one line on stderr and a documented exit code."""

    @functools.wraps(command)
    def wrapper(*args, **kwargs):
        try:
            with _sigterm_interrupts():
                _check_text_arguments(command, kwargs)
                return command(*args, **kwargs)
        except MtError as err:
            fail(str(err), err.exit_code)
        except Terminated:
            fail("terminated by SIGTERM", EXIT_INTERRUPTED)
        except KeyboardInterrupt:
            fail("interrupted", EXIT_INTERRUPTED)
        except BrokenPipeError:
            # The reader went away (`mt translate ... | head`): stop quietly, as `cat` does.
            with contextlib.suppress(OSError, AttributeError, ValueError):  # stdout may be closed
                os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            raise typer.Exit(EXIT_BROKEN_PIPE) from None

    return wrapper  # type: ignore[return-value]


@contextlib.contextmanager
def _sigterm_interrupts() -> Iterator[None]:
    """SIGTERM raises ``Terminated`` (a KeyboardInterrupt) in this process while the command runs,
    so that what Ctrl-C cleans up (temporary outputs, worker processes) is cleaned up for it too.

    Where SIGTERM is not at its default (ignored by whoever started mt, or handled by an embedding
    program) or this is not the main thread, nothing changes. ``mt train`` and ``mt serve`` set
    their own handler while they train or serve. A forked child (a decoding or loader worker)
    that inherits the handler dies by the signal, as it would have without it.
    """
    main = threading.current_thread() is threading.main_thread()
    if not main or signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        yield
        return
    pid = os.getpid()

    def terminate(signum: int, frame: object) -> None:
        if os.getpid() != pid:  # a forked worker: the default, death by SIGTERM
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGTERM)
            return
        raise Terminated

    signal.signal(signal.SIGTERM, terminate)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)


def standard_stream(name: str, instead: str | None = None) -> TextIO:
    """``sys.stdin`` or ``sys.stdout`` for a command that reads or writes it; an InputError that
    says ``instead`` what to do if the process started with it closed (``mt translate <&-``,
    ``>&-``): Python then has none."""
    stream = getattr(sys, name)
    if stream is None:
        what, default = {
            "stdin": ("input", "give the text as an argument or --input FILE"),
            "stdout": ("output", "redirect it to a file, or give --output FILE"),
        }[name]
        raise InputError(f"standard {what} is closed; {instead or default}")
    return stream


def write_stdout(text: str) -> None:
    """Write ``text`` to standard output and return once the system has taken every byte.

    Python's buffered stdout drops the rest of a large write silently when the reader of a pipe
    goes away midway (the system call returns a short count, not EPIPE); writing the bytes
    ourselves until all are taken turns that into the BrokenPipeError that exits 141.
    """
    stdout = standard_stream("stdout")
    try:
        fd = stdout.fileno()
    except (AttributeError, OSError, ValueError):  # a stream without a file (a test's capture)
        stdout.write(text)
        stdout.flush()
        return
    stdout.flush()
    data = memoryview(text.encode(stdout.encoding or "utf-8", stdout.errors or "strict"))
    while data:
        data = data[os.write(fd, data) :]


def _check_text_arguments(command: Callable, arguments: dict[str, Any]) -> None:
    """InputError for a text argument that is not UTF-8.

    Python hands such bytes of the command line over as lone surrogates ("\\udcff" for 0xff),
    which SentencePiece, YAML and JSON all refuse with a traceback. Path options arrive as Path
    objects and a value naming an existing file is a path too (``--config FILE``): the file
    system takes any bytes.
    """
    for name, value in arguments.items():
        for text in value if isinstance(value, list) else [value]:
            if not isinstance(text, str) or os.path.exists(text):
                continue
            try:
                text.encode("utf-8")
            except UnicodeEncodeError as err:
                byte = ord(text[err.start]) - 0xDC00  # surrogateescape: U+DC80..U+DCFF hold bytes 0x80..0xff
                shown = f"byte 0x{byte:02x}" if 0x80 <= byte <= 0xFF else "a lone surrogate"
                raise InputError(
                    f"{_argument_label(command, name)} is not UTF-8 text ({shown} at character "
                    f"{err.start + 1}); pass UTF-8 (a UTF-8 locale, or convert with iconv -t UTF-8)"
                ) from None


def _argument_label(command: Callable, name: str) -> str:
    """How a person typed the parameter ``name`` of ``command``: its long option, or TEXT for an argument."""
    try:
        hint = get_type_hints(command, include_extras=True).get(name)
    except NameError:  # a hint that names a type imported for type checking only
        hint = None
    for info in getattr(hint, "__metadata__", ()):
        if isinstance(info, OptionInfo):
            flags = [d for d in (info.default, *info.param_decls) if isinstance(d, str) and d.startswith("-")]
            return next((flag for flag in flags if flag.startswith("--")), f"--{name.replace('_', '-')}")
    return f"the argument {name.upper()}"


def run_from(positional: Path | None, option: Path) -> Path:
    """The run directory given positionally (the older spelling of two commands) or with --run."""
    return positional if positional is not None else option
