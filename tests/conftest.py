"""Shared fixtures: the Multi30k copy that ships with mt and small tokenizers trained on it,
trained runs, child processes started as a terminal starts them; helpers.py holds the shared
functions that are not fixtures.

No test depends on the environment: MT_DATA_DIR is removed for every test (the tests about
that variable set it themselves), so the suite reads the shipped corpus from any directory.
Nor on how the suite was started: a child that a test interrupts gets SIGINT at its default even
when pytest runs in the background with SIGINT ignored (``spawn``), and the suite fails if it
leaves a process running when it ends.
"""

from __future__ import annotations

import gc
import os
import signal
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from helpers import (
    CONFIGS,
    FAST_TRAINING,
    MANY_TO_ENGLISH_LINE,
    MANY_TO_ENGLISH_SOURCES,
    SUITE_MARK,
    TinyCorpus,
    end_group,
    many_to_english_corpora,
    processes_left,
    quiet,
    start_child,
    wait_until,
)

from mt_cli.config.sections import TokenizerConfig
from mt_cli.disk.reading import read_lines
from mt_cli.disk.resources import SHIPPED_MULTI30K
from mt_cli.text.tokenizer import Tokenizer, train_tokenizer

if TYPE_CHECKING:
    from mt_cli.data.prepare import TrainingData
    from mt_cli.decode.translator import Translator
    from mt_cli.trained import TrainedModel

# torch.compile's inductor keeps a pool of compile workers (one per core) alive until the
# interpreter exits, which the check below would count as left running (16 of them on a 16-core
# GPU machine): compile in this process. Set before anything imports inductor's config, which
# reads it once.
os.environ["TORCHINDUCTOR_COMPILE_THREADS"] = "1"

SMALL_VOCAB = 500
SMALL_PAIRS = 3000


@pytest.fixture(scope="session", autouse=True)
def _no_process_outlives_the_suite() -> Iterator[None]:
    """When the session ends, every process it started has ended: any left (by parent pid, or
    by the mark every child inherits in its environment, for one whose parent is gone) is killed
    and named, and the session fails."""
    os.environ[SUITE_MARK] = str(os.getpid())
    yield
    gc.collect()  # a dropped engine stops its decoding workers once it is collected
    me = os.getpid()
    wait_until(lambda: not processes_left(me), seconds=15)  # some are still on their way out
    left = processes_left(me)
    for pid in left:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    del os.environ[SUITE_MARK]
    if left:
        named = "\n".join(f"  {pid}: {line}" for pid, line in sorted(left.items()))
        pytest.fail(f"the suite left {len(left)} processes running (killed now):\n{named}", pytrace=False)


@pytest.fixture
def spawn() -> Iterator[Callable[..., subprocess.Popen]]:
    """``spawn(command, **popen)``: a child started as a terminal starts it, SIGINT at its default
    and in a process group of its own (helpers.start_child); when the test ends, passed or failed,
    that group is killed, so nothing it started outlives the test."""
    started: list[subprocess.Popen] = []

    def start(command: list[str], **popen: Any) -> subprocess.Popen:
        started.append(start_child(command, **popen))
        return started[-1]

    yield start
    for process in started:
        end_group(process)


@pytest.fixture(autouse=True)
def _no_data_dir_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MT_DATA_DIR", raising=False)


@pytest.fixture(scope="session")
def data_dir() -> Path:
    """The raw Multi30k files that ship in data/multi30k."""
    return SHIPPED_MULTI30K


def _raw(data_dir: Path, stem: str, lang: str) -> Path:
    gz = data_dir / f"{stem}.{lang}.gz"
    return gz if gz.exists() else data_dir / f"{stem}.{lang}"


@pytest.fixture(scope="session")
def train_pairs(data_dir: Path) -> tuple[list[str], list[str]]:
    """The full Multi30k training split, German and English."""
    return read_lines(_raw(data_dir, "train", "de")), read_lines(_raw(data_dir, "train", "en"))


@pytest.fixture(scope="session")
def small_tokenizers(
    train_pairs: tuple[list[str], list[str]], tmp_path_factory: pytest.TempPathFactory
) -> tuple[Tokenizer, Tokenizer]:
    """(de, en) BPE models with 500 pieces, trained on the first 3000 training pairs."""
    run_dir = tmp_path_factory.mktemp("spm")
    cfg = TokenizerConfig(src_vocab_size=SMALL_VOCAB, tgt_vocab_size=SMALL_VOCAB)
    de, en = train_pairs
    return (
        train_tokenizer(de[:SMALL_PAIRS], "de", SMALL_VOCAB, cfg, run_dir),
        train_tokenizer(en[:SMALL_PAIRS], "en", SMALL_VOCAB, cfg, run_dir),
    )


@pytest.fixture(scope="session")
def tiny_config_path() -> Path:
    return CONFIGS / "tiny.yaml"


@pytest.fixture(scope="session")
def tiny_corpus(tmp_path_factory: pytest.TempPathFactory) -> TinyCorpus:
    """The tiny recipe's splits and its two tokenizers (trained once per session)."""
    from mt_cli.config.recipe import load_config
    from mt_cli.data.prepare import load_eval_splits, tokenizer_sample
    from mt_cli.text.tokenizer import prepare_tokenizers

    cfg = load_config(CONFIGS / "tiny.yaml", FAST_TRAINING)
    root = tmp_path_factory.mktemp("tiny")
    toks = prepare_tokenizers(cfg, root, *tokenizer_sample(cfg), log=quiet)
    return TinyCorpus(root, load_eval_splits(cfg, quiet), *toks)


@pytest.fixture(scope="session")
def tiny_data(tiny_corpus: TinyCorpus) -> TrainingData:
    """The tiny recipe's training data as the trainer reads it."""
    from mt_cli.config.recipe import load_config

    return tiny_corpus.training_data(load_config(CONFIGS / "tiny.yaml", FAST_TRAINING))


@pytest.fixture(scope="session")
def trained_run(data_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A run directory trained by `mt train` on the tiny recipe: tokenizers, checkpoints, scores."""
    from mt_cli.config.recipe import load_config
    from mt_cli.train.run import train

    run_dir = tmp_path_factory.mktemp("trained") / "run"
    overrides = [
        "data.train_limit=1500",
        "train.max_epochs=3",
        "train.test_at_end=false",
        f"run_dir={run_dir}",
    ]
    cfg = load_config(CONFIGS / "tiny.yaml", overrides)
    train(cfg, run_dir, resume=False, log=lambda message: None)
    return run_dir


@pytest.fixture(scope="session")
def trained(trained_run: Path) -> TrainedModel:
    """The trained run's best model as loaded (fp32 on the CPU): what every export writes."""
    from mt_cli.trained import load_trained

    return load_trained(trained_run)


@pytest.fixture(scope="session")
def fp32(trained: TrainedModel) -> Translator:
    """``trained`` decoding in fp32 on the CPU: what every export is compared with."""
    from mt_cli.decode.translator import Translator
    from mt_cli.runtime.precision import ComputeType

    return Translator.of(trained, "cpu", ComputeType.FLOAT32)


@pytest.fixture(scope="session")
def many_to_english(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny de, fr, cs -> en model with target tags (test_directions, the page, the exports)."""
    import json

    from mt_cli.config.recipe import load_config
    from mt_cli.train.run import train

    root = tmp_path_factory.mktemp("many-to-en")
    overrides = [
        f"data.corpora={json.dumps(many_to_english_corpora(root))}",
        "data.target_tags=true",
        "train.max_tokens=1024",
        "train.amp=off",
        "train.max_steps=30",
        "train.validate_every_steps=30",
        "train.average_last=0",
        "train.log_every_steps=10",
    ]
    run_dir = root / "run"
    train(load_config(CONFIGS / "tiny.yaml", overrides), run_dir, resume=False, log=quiet)
    return run_dir


@pytest.fixture(scope="session")
def many_to_english_sentences() -> dict[str, str]:
    """One test2016 sentence in each source language, of the same image."""
    line = MANY_TO_ENGLISH_LINE
    return {
        lang: read_lines(SHIPPED_MULTI30K / f"test_2016_flickr.{lang}.gz")[line]
        for lang in MANY_TO_ENGLISH_SOURCES
    }
