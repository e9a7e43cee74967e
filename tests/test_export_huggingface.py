"""export.huggingface: a trained run as a MarianMTModel directory that decodes like mt.

The trained tiny run is exported once per module; its greedy output is compared with mt's token
for token (float32), each sentence under mt's own length limit.
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
from transformers import GenerationConfig, MarianMTModel, MarianTokenizer
from transformers.models.marian.modeling_marian import MarianSinusoidalPositionalEmbedding

from mt_cli.config.options import TranslateOptions
from mt_cli.config.sections import ModelConfig
from mt_cli.data.batch import collate, target_ids
from mt_cli.decode.hypotheses import output_limit
from mt_cli.decode.translator import Translator
from mt_cli.disk.reading import read_lines
from mt_cli.disk.resources import SHIPPED_MULTI30K
from mt_cli.errors import ConfigError, InputError
from mt_cli.export.huggingface import export_huggingface, marian_model, residual_permutation
from mt_cli.model.layers import PositionalEncoding
from mt_cli.model.transformer import Transformer, build_model
from mt_cli.runtime.precision import ComputeType
from mt_cli.specials import BOS_ID, EOS_ID, PAD_ID
from mt_cli.trained import TrainedModel, load_trained

LINES = 30


@pytest.fixture(scope="module", autouse=True)
def _one_thread(trained_run: Path) -> Iterator[None]:
    """The tiny model's matmuls gain nothing from a second thread, and on a busy machine the
    threads' synchronisation makes decoding many times slower. After the shared run is trained,
    so that it does not depend on which test module asked for it first."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def translator(fp32: Translator) -> Translator:
    return fp32


@pytest.fixture(scope="module")
def exported(trained: TrainedModel, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return export_huggingface(trained, tmp_path_factory.mktemp("hf") / "marian")


@pytest.fixture(scope="module")
def marian(exported: Path) -> MarianMTModel:
    return MarianMTModel.from_pretrained(exported).eval()


@pytest.fixture(scope="module")
def tokenizer(exported: Path) -> MarianTokenizer:
    return MarianTokenizer.from_pretrained(exported)


@pytest.fixture(scope="module")
def german() -> list[str]:
    return read_lines(SHIPPED_MULTI30K / "test_2016_flickr.de.gz")[:LINES]


@pytest.fixture(scope="module")
def english() -> list[str]:
    return read_lines(SHIPPED_MULTI30K / "test_2016_flickr.en.gz")[:LINES]


def mt_limit(translator: Translator, source_length: int) -> int:
    """mt's cap on generated tokens, EOS included, for a source of this many ids (EOS included)."""
    dec = translator.card.decode
    return output_limit(source_length, dec.max_len_a, dec.max_len_b, translator.model.max_positions)


def with_model(trained: TrainedModel, cfg: ModelConfig, model: Transformer) -> TrainedModel:
    """The trained model's tokenizers and card around another model."""
    return TrainedModel(dataclasses.replace(trained.card, model=cfg), trained.src_tok, trained.tgt_tok, model)


def test_the_permutation_turns_mt_positions_into_marians() -> None:
    for positions, d_model in ((64, 64), (256, 512)):
        mt_table = PositionalEncoding(d_model, positions).pe  # (P, D) interleaved sin, cos
        marian_table = MarianSinusoidalPositionalEmbedding(positions, d_model).create_weight()  # (P, D)
        assert torch.allclose(mt_table[:, residual_permutation(d_model)], marian_table, atol=1e-4)
        assert not torch.allclose(mt_table, marian_table, atol=1e-4)


def test_the_loaded_model_rebuilds_the_permuted_table(translator: Translator, marian: MarianMTModel) -> None:
    perm = residual_permutation(translator.card.model.d_model)
    for embedding in (marian.model.encoder.embed_positions, marian.model.decoder.embed_positions):
        assert torch.allclose(translator.model.positions.pe[:, perm], embedding.weight, atol=1e-5)


def test_the_tokenizer_gives_mt_source_ids(
    translator: Translator, tokenizer: MarianTokenizer, german: list[str]
) -> None:
    sources = translator.encode_sources(german, warn=lambda message: None)
    assert tokenizer(german)["input_ids"] == sources
    assert tokenizer.pad_token_id == PAD_ID and tokenizer.eos_token_id == EOS_ID


def test_encoder_states_and_logits_equal_mt(
    translator: Translator, marian: MarianMTModel, german: list[str], english: list[str]
) -> None:
    sources = translator.encode_sources(german, warn=lambda message: None)
    batch = collate(sources, [target_ids(ids) for ids in translator.tgt_tok.encode(english)])
    src_real, tgt_real = batch.src_mask[:, 0, 0], batch.tgt_in != PAD_ID  # (B, S), (B, T)
    perm = residual_permutation(translator.card.model.d_model)
    with torch.inference_mode():
        memory = translator.model.encode(batch.src, batch.src_mask)  # (B, S, D)
        logits = translator.model(batch.src, batch.tgt_in, batch.src_mask, batch.tgt_mask)  # (B, T, V)
        out = marian(
            input_ids=batch.src,
            attention_mask=src_real.long(),
            decoder_input_ids=batch.tgt_in,
            decoder_attention_mask=tgt_real.long(),
        )
    assert torch.allclose(out.encoder_last_hidden_state[src_real], memory[..., perm][src_real], atol=1e-4)
    assert torch.allclose(out.logits[tgt_real], logits[tgt_real], atol=1e-4)


def test_greedy_generate_gives_mt_greedy_tokens_and_text(
    translator: Translator, marian: MarianMTModel, tokenizer: MarianTokenizer, german: list[str]
) -> None:
    """Per-sentence limits: sentences sharing mt's limit are generated as one padded batch with
    ``max_new_tokens`` that limit, so those mt cut short (EOS forced) are compared too."""
    expected = [
        translator.tgt_tok.to_ids(t.best.tokens)
        for t in translator.translate(german, TranslateOptions(beam=1))
    ]
    sources = translator.encode_sources(german, warn=lambda message: None)
    groups: dict[int, list[int]] = defaultdict(list)
    for i, ids in enumerate(sources):
        groups[mt_limit(translator, len(ids))].append(i)
    got: dict[int, list[int]] = {}
    texts: dict[int, str] = {}
    for limit, indices in groups.items():
        batch = tokenizer([german[i] for i in indices], return_tensors="pt", padding=True)
        with torch.inference_mode():
            out = marian.generate(**batch, num_beams=1, do_sample=False, max_new_tokens=limit)
        decoded = tokenizer.batch_decode(out, skip_special_tokens=True)
        for i, row, text in zip(indices, out.tolist(), decoded, strict=True):
            assert row[0] == BOS_ID
            got[i] = row[1 : row.index(EOS_ID)] if EOS_ID in row else row[1:]
            texts[i] = text
    assert [got[i] for i in range(len(german))] == expected
    assert [texts[i] for i in range(len(german))] == translator.tgt_tok.decode(expected)
    assert len(groups) > 1  # several limits, so padding and forced EOS were exercised


def test_auto_classes_load_the_export_and_beam_search_gives_mt_beams(
    translator: Translator, exported: Path, german: list[str]
) -> None:
    """What transformers 5 users call (it has no translation pipeline): the Auto classes, then
    ``generate`` with the export's own generation config (mt's beam size and length penalty)."""
    from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

    model = AutoModelForSeq2SeqLM.from_pretrained(exported).eval()
    tokenizer = AutoTokenizer.from_pretrained(exported)
    assert isinstance(model, MarianMTModel)
    lines = german[:12]
    beam = translator.card.decode.beam_size
    assert model.generation_config.num_beams == beam > 1
    expected = translator.translate_lines(lines, TranslateOptions(beam=beam))
    sources = translator.encode_sources(lines, warn=lambda message: None)
    got = []
    for line, ids in zip(lines, sources, strict=True):
        batch = tokenizer([line], return_tensors="pt")
        with torch.inference_mode():
            out = model.generate(**batch, max_new_tokens=mt_limit(translator, len(ids)))
        got.append(tokenizer.batch_decode(out, skip_special_tokens=True)[0])
    assert got == expected


def _has_translation_pipeline() -> bool:
    import transformers.pipelines

    return "translation" not in getattr(transformers.pipelines, "REMOVED_TASKS", {})


if _has_translation_pipeline():  # transformers 4 only: 5 removed the task, so there is nothing to test

    def test_the_translation_pipeline_gives_mt_text(
        translator: Translator, exported: Path, german: list[str]
    ) -> None:
        import transformers.pipelines

        translate = transformers.pipelines.pipeline("translation", model=str(exported), device="cpu")
        lines = german[:2]
        expected = translator.translate_lines(lines, TranslateOptions(beam=1))
        sources = translator.encode_sources(lines, warn=lambda message: None)
        for line, ids, text in zip(lines, sources, expected, strict=True):
            limit = mt_limit(translator, len(ids))
            result = translate(line, num_beams=1, do_sample=False, max_new_tokens=limit)
            assert result[0]["translation_text"] == text


@pytest.mark.parametrize(
    ("share", "tie", "activation"), [(True, True, "gelu"), (True, False, "relu"), (False, False, "gelu")]
)
def test_other_embedding_layouts_and_gelu_map_exactly(
    trained: TrainedModel, share: bool, tie: bool, activation: str
) -> None:
    layout = {"share_embeddings": share, "tie_output": tie, "activation": activation}
    cfg = dataclasses.replace(trained.card.model, **layout)
    vocab = trained.model.tgt_vocab_size
    torch.manual_seed(0)
    model = build_model(cfg, vocab if share else trained.model.src_vocab_size, vocab).eval()
    with torch.no_grad():
        for param in model.parameters():  # away from the zero biases and unit norms of init
            param.add_(0.1 * torch.randn_like(param))
    variant = with_model(trained, cfg, model)
    src = torch.randint(4, vocab, (2, 7))
    tgt = torch.cat([torch.full((2, 1), BOS_ID), torch.randint(4, vocab, (2, 5))], dim=1)
    causal = torch.ones(6, 6, dtype=torch.bool).tril()[None, None]  # (1, 1, T, T)
    with torch.inference_mode():
        expected = model(src, tgt, torch.ones(2, 1, 1, 7, dtype=torch.bool), causal)
        got = marian_model(variant)(input_ids=src, decoder_input_ids=tgt).logits
    assert torch.allclose(got, expected, atol=1e-4)


def test_a_pre_norm_run_is_refused_in_one_line(trained: TrainedModel, tmp_path: Path) -> None:
    cfg = dataclasses.replace(trained.card.model, norm_first=True)
    model = build_model(cfg, trained.model.src_vocab_size, trained.model.tgt_vocab_size)
    with pytest.raises(ConfigError, match="post-norm only") as err:
        export_huggingface(with_model(trained, cfg, model), tmp_path / "marian")
    assert "\n" not in str(err.value)
    assert list(tmp_path.iterdir()) == []


def test_an_existing_directory_is_refused_and_left_alone(trained: TrainedModel, tmp_path: Path) -> None:
    out = tmp_path / "marian"
    out.mkdir()
    (out / "keep.txt").write_text("mine", encoding="utf-8")
    with pytest.raises(InputError, match="already exists"):
        export_huggingface(trained, out)
    assert [p.name for p in out.iterdir()] == ["keep.txt"]
    assert (out / "keep.txt").read_text(encoding="utf-8") == "mine"
    assert [p.name for p in tmp_path.iterdir()] == ["marian"]


def test_the_export_holds_marian_files_and_a_model_card(exported: Path, translator: Translator) -> None:
    model_files = {"config.json", "generation_config.json", "model.safetensors", "README.md"}
    tokenizer_files = {"tokenizer_config.json", "source.spm", "target.spm", "vocab.json", "target_vocab.json"}
    assert model_files | tokenizer_files <= {p.name for p in exported.iterdir()}
    assert not [p for p in exported.parent.iterdir() if p.name.startswith(".")]  # no staging left
    readme = (exported / "README.md").read_text(encoding="utf-8")
    assert f"- {translator.src_lang}\n- {translator.tgt_lang}\n" in readme
    assert GenerationConfig.from_pretrained(exported).decoder_start_token_id == BOS_ID


def test_a_model_with_target_tags_reads_marians_language_code(
    many_to_english: Path, many_to_english_sentences: dict[str, str], tmp_path: Path
) -> None:
    tagged = Translator.of(load_trained(many_to_english), "cpu", ComputeType.FLOAT32)
    out = export_huggingface(load_trained(many_to_english), tmp_path / "marian")
    lines = list(many_to_english_sentences.values())
    # Marian's language code, typed as for its multilingual models, is the ids mt's engine gives.
    typed = MarianTokenizer.from_pretrained(out)([f">>en<< {line}" for line in lines])["input_ids"]
    assert typed == tagged.encode_sources(lines, warn=lambda message: None, tgt_lang="en")
    assert typed[0][0] == tagged.src_tok.piece_id("<2en>")
    assert "start every text with `>>en<<`" in (out / "README.md").read_text()


def test_the_bench_row_of_the_export_translates_as_mt(
    translator: Translator, exported: Path, german: list[str]
) -> None:
    """``mt bench --engines``' Hugging Face row decodes with the options it is given: greedy line
    for line as mt; a beam of 3 as mt's beam but where a hypothesis runs into the length limit
    (``generate`` and mt stop a beam there differently; the greedy test above says more)."""
    from mt_cli.tools.engines import HuggingFaceEngine

    engine = HuggingFaceEngine(exported)
    greedy = TranslateOptions(beam=1)
    assert engine.translate_lines(german[:30], greedy) == translator.translate_lines(german[:30], greedy)
    beam = TranslateOptions(beam=3, length_penalty=0.5)
    theirs, ours = engine.translate_lines(german[:30], beam), translator.translate_lines(german[:30], beam)
    assert sum(a == b for a, b in zip(theirs, ours)) >= 28
    assert theirs != engine.translate_lines(german[:30], greedy)  # the beam was used
