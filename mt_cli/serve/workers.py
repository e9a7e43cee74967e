"""mt's engine decoded in worker processes, one per core, so a server keeps every core busy.

On a CPU one process decoding on every core leaves them idle between the many small operators of
a beam step, and a server's event loop shares that process's GIL; one single-threaded process per
core does not (``decode.processes`` says the same of ``mt translate``: 1.53x at beam 5). A worker
does the whole of a batch: tokenizing, decoding, detokenizing; the server sends the lines and the
options and gets the hypotheses back (pickled over a socket pair).

``WorkerPool`` forks a *spawner* when it is made, which must be before the server starts a thread:
a fork copies only the thread that calls it, and a lock another thread held would stay locked in
the child forever. The spawner holds the loaded engine and nothing else runs in it, so it can fork
a worker at any time, also while the server runs its threads: the pool asks for one over a
control socket and receives the new worker's socket as a passed file descriptor. The model's
weights are shared copy-on-write by every process.

A worker that dies (killed, out of memory) is replaced at once and its batch sent to the new one;
if that one dies too, the batch fails with ``WorkerDied`` (the server answers 500), so one input
that kills workers cannot take them all down in a loop. Workers and the spawner ignore SIGINT and
SIGTERM, which the server handles for all of them (it drains, then closes their sockets, and they
exit), and die with the server if it is killed (Linux's parent-death signal).
"""

from __future__ import annotations

import logging
import os
import queue
import signal
import socket
import threading
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import NoReturn

import torch

from mt_cli.decode.processes import die_with_parent
from mt_cli.serve.decoders import Decode, WorkerDied

logger = logging.getLogger("mt.serve")


def _ignore_stop_signals() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)


class _EngineError(RuntimeError):
    """What the engine raised in a worker, as one line (an exception may not pickle)."""


@dataclass
class _Worker:
    pid: int
    connection: Connection

    def call(self, lines: list[str], key: Hashable) -> list[object]:
        """The worker's results; ``EOFError`` or ``OSError`` if it died."""
        self.connection.send((lines, key))
        status, payload = self.connection.recv()
        if status != "ok":
            raise _EngineError(payload)
        return payload

    def end(self) -> None:
        """Close its socket (a live worker exits at that) and make sure it is gone."""
        self.connection.close()
        try:
            os.kill(self.pid, signal.SIGKILL)
        except ProcessLookupError:  # already gone (the spawner reaps its children)
            pass


class WorkerPool:
    """``workers`` worker processes that each decode one batch at a time with ``decode``."""

    def __init__(self, decode: Decode, workers: int, close_in_children: Sequence[socket.socket] = ()) -> None:
        """Fork the spawner (before any thread!), then ``workers`` workers from it.
        ``close_in_children``: sockets of the server (the listener) the children must not hold."""
        if workers < 1:
            raise ValueError("a worker pool needs at least one worker")
        self.parallel = workers
        self.restarts = 0
        self._control, spawner_end = socket.socketpair()
        server = os.getpid()
        self._spawner = os.fork()
        if self._spawner == 0:  # the spawner: never returns
            self._control.close()
            for inherited in close_in_children:
                inherited.close()
            _spawn_forever(spawner_end, decode, server)
        spawner_end.close()
        self._control_lock = threading.Lock()
        self._free: queue.SimpleQueue[_Worker] = queue.SimpleQueue()
        self.pids: list[int] = []
        for _ in range(workers):
            worker = self._new_worker()
            self.pids.append(worker.pid)
            self._free.put(worker)

    def decode(self, lines: list[str], key: Hashable) -> list[object]:
        """A free worker's results for the lines; a worker that dies is replaced and the lines
        sent once more, and ``WorkerDied`` if the new one dies too."""
        worker = self._free.get()
        try:
            try:
                return worker.call(lines, key)
            except (EOFError, OSError) as err:
                worker = self._replace(worker, err)
            try:
                return worker.call(lines, key)
            except (EOFError, OSError) as err:
                worker = self._replace(worker, err)
                raise WorkerDied(
                    f"two decoding workers died on a batch of {len(lines)} lines; see the log"
                ) from None
        finally:
            self._free.put(worker)

    def close(self) -> None:
        """End every worker and the spawner (each exits when its socket closes)."""
        while True:
            try:
                self._free.get_nowait().end()
            except queue.Empty:
                break
        self._control.close()
        try:
            os.waitpid(self._spawner, 0)
        except ChildProcessError:
            pass

    def _replace(self, dead: _Worker, err: BaseException) -> _Worker:
        logger.error("mt serve: decoding worker %d died (%s); starting another", dead.pid, err)
        dead.end()
        worker = self._new_worker()
        self.restarts += 1
        self.pids = [worker.pid if pid == dead.pid else pid for pid in self.pids]
        return worker

    def _new_worker(self) -> _Worker:
        with self._control_lock:
            self._control.sendall(b"w")
            message, fds, _, _ = socket.recv_fds(self._control, 16, 1)
        if not fds:
            raise WorkerDied("the process that starts decoding workers has died; restart mt serve")
        return _Worker(int.from_bytes(message, "little"), Connection(fds[0]))


def _spawn_forever(control: socket.socket, decode: Decode, server: int) -> NoReturn:
    """The spawner: a worker forked for each byte the server sends, its socket sent back."""
    try:
        _ignore_stop_signals()
        die_with_parent(server)
        signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # the kernel reaps the workers that end
        me = os.getpid()
        while control.recv(1):
            server_end, worker_end = socket.socketpair()
            pid = os.fork()
            if pid == 0:
                control.close()
                server_end.close()
                _work(worker_end, decode, me)
            worker_end.close()
            socket.send_fds(control, [pid.to_bytes(4, "little")], [server_end.fileno()])
            server_end.close()
    finally:
        os._exit(0)  # never the server's atexit handlers, in a copy of it


def _work(sock: socket.socket, decode: Decode, spawner: int) -> NoReturn:
    """A worker: decode each batch that arrives until the server closes the socket."""
    try:
        die_with_parent(spawner)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        torch.set_num_threads(1)
        connection = Connection(sock.detach())
        while True:
            try:
                lines, key = connection.recv()
            except EOFError:
                break
            try:
                answer: tuple[str, object] = ("ok", list(decode(lines, key)))
            except Exception as err:  # the engine's failure on these lines: reported, the worker lives
                answer = ("error", " ".join(f"{type(err).__name__}: {err}".split()))
            connection.send(answer)
    finally:
        os._exit(0)
