"""The app in-process over a fake engine: what a real model cannot be made to do on demand."""

from __future__ import annotations

from collections.abc import Sequence

from fastapi.testclient import TestClient

from mt_cli.serve.app import Settings, create_app


class BrokenEngine:
    """An engine for de -> en that fails on the line "boom" and upper-cases the rest."""

    src_lang, tgt_lang, beam_size, origin, parallel_batches = "de", "en", 4, "a fake", 1

    def translate_lines(self, lines: Sequence[str], beam_size: int | None = None, **_: object) -> list[str]:
        if "boom" in lines:
            raise RuntimeError("the engine broke")
        return [line.upper() for line in lines]


def test_an_engine_failure_is_a_500_error_and_the_server_goes_on() -> None:
    ready: list[bool] = []
    with TestClient(create_app(BrokenEngine(), Settings(), on_ready=lambda: ready.append(True))) as client:
        assert ready == [True]
        failed = client.post("/translate", json={"q": "boom", "source": "de", "target": "en"})
        assert failed.status_code == 500 and failed.json() == {
            "error": "Cannot translate text: the engine broke"
        }
        ok = client.post("/translate", json={"q": "hund\nkatze", "source": "de", "target": "en"})
        assert ok.json() == {"translatedText": "HUND\nKATZE"}
        assert client.options(
            "/translate", headers={"Origin": "https://example.org", "Access-Control-Request-Method": "POST"}
        ).headers["access-control-allow-origin"] in ("*", "https://example.org")
