"""`mt serve` for real, as a deployment runs it (issue 30): stopped by SIGTERM while a client
stalls mid-body, slow or silent clients timed out, idle connections closed, a cap on the
requests handled at once. Raw sockets play the clients that no HTTP library would be.
"""

from __future__ import annotations

import json
import signal
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from helpers import ServeProcess, address, raw_post, start_server

GRACE_S = 4.0
BODY = b'{"q": "Ein Hund.", "source": "de", "target": "en"}'


@pytest.fixture(scope="module")
def strict(trained_run: Path) -> Iterator[ServeProcess]:
    """Short timeouts, and at most 3 requests at once."""
    options = ["--timeout-read", "1", "--timeout-keep-alive", "1", "--limit-concurrency", "3"]
    running = start_server(trained_run, *options)
    yield running
    assert running.stop() == 0
    assert "Traceback" not in "".join(running.stderr), "".join(running.stderr)


def _connect(server: ServeProcess) -> socket.socket:
    client = socket.create_connection(address(server.url), timeout=10)
    client.settimeout(10)
    return client


def _read_all(client: socket.socket) -> bytes:
    """Everything the server sends until it closes the connection (10 s at most)."""
    chunks = []
    while chunk := client.recv(65536):
        chunks.append(chunk)
    return b"".join(chunks)


def _status_and_json(answer: bytes) -> tuple[int, dict]:
    head, _, body = answer.partition(b"\r\n\r\n")
    return int(head.split()[1]), json.loads(body)


def test_a_body_that_stops_arriving_gets_408_json_after_the_read_timeout(strict) -> None:
    with _connect(strict) as client:
        client.sendall(raw_post("/translate", BODY[:10], length=len(BODY)))  # says 51 bytes, sends 10
        started = time.monotonic()
        answer = _read_all(client)
    assert 0.9 < time.monotonic() - started < 5
    assert _status_and_json(answer) == (408, {"error": "the request body did not arrive within 1 s"})


def test_headers_that_never_end_and_silent_connections_are_closed_after_the_read_timeout(strict) -> None:
    with _connect(strict) as silent, _connect(strict) as partial:
        partial.sendall(b"POST /translate HTTP/1.1\r\nHost: mt\r\nContent-Le")
        started = time.monotonic()
        assert _read_all(silent) == b"" and _read_all(partial) == b""
    assert 0.9 < time.monotonic() - started < 5


def test_an_idle_kept_alive_connection_is_closed_after_the_keep_alive_timeout(strict) -> None:
    with _connect(strict) as client:
        client.sendall(b"GET /health HTTP/1.1\r\nHost: mt\r\n\r\n")
        started = time.monotonic()
        answer = _read_all(client)  # the answer, then the close a second later
    assert answer.startswith(b"HTTP/1.1 200") and b'"status":"ok"' in answer
    assert 0.9 < time.monotonic() - started < 5


def test_a_malformed_request_line_gets_400_json(strict) -> None:
    with _connect(strict) as client:
        client.sendall(b"NOT HTTP AT ALL\r\n\r\n")
        status, body = _status_and_json(_read_all(client))
    assert status == 400 and body["error"].startswith("invalid HTTP request")


def test_past_limit_concurrency_requests_get_503_json_until_a_place_is_free(strict) -> None:
    stalled = [_connect(strict) for _ in range(3)]
    try:
        for client in stalled:  # each holds its place for the read timeout (1 s)
            client.sendall(raw_post("/translate", BODY[:10], length=len(BODY)))
        time.sleep(0.3)
        refused = httpx.post(f"{strict.url}/translate", content=BODY, timeout=10)
        assert refused.status_code == 503 and "--limit-concurrency" in refused.json()["error"]
        assert all(_status_and_json(_read_all(client))[0] == 408 for client in stalled)
    finally:
        for client in stalled:
            client.close()
    assert httpx.get(f"{strict.url}/health", timeout=10).status_code == 200


def test_a_client_that_hangs_up_mid_body_leaves_no_traceback(strict) -> None:
    with _connect(strict) as client:
        client.sendall(raw_post("/translate", BODY[:10], length=len(BODY)))
        time.sleep(0.2)
    time.sleep(0.3)
    assert httpx.get(f"{strict.url}/health", timeout=10).status_code == 200
    assert "Traceback" not in "".join(strict.stderr) and "ClientDisconnect" not in "".join(strict.stderr)


def test_sigterm_with_a_client_stalled_mid_body_exits_0_within_the_grace_period(trained_run: Path) -> None:
    running = start_server(trained_run, "--timeout-graceful-shutdown", str(GRACE_S), "--timeout-read", "60")
    try:
        with _connect(running) as stalled, _connect(running) as idle, _connect(running) as half:
            stalled.sendall(raw_post("/translate", BODY[:10], length=100))  # headers say 100 bytes, 10 come
            half.sendall(b"POST /translate HTTP/1.1\r\nHost: mt\r\n")
            time.sleep(0.3)
            started = time.monotonic()
            running.process.send_signal(signal.SIGTERM)
            code = running.process.wait(GRACE_S + 5)
            elapsed = time.monotonic() - started
            answer = _read_all(stalled)
            assert _read_all(idle) == b"" and _read_all(half) == b""
    finally:
        running.kill()  # a no-op once it has exited; else a failed test leaves no server behind
    assert code == 0 and elapsed < GRACE_S, elapsed
    assert _status_and_json(answer) == (503, {"error": "the server is stopping; send the request again"})
    assert "Traceback" not in "".join(running.stderr)
