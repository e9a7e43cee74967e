"""The textbook baseline of ``mt bench``: our model's function, built from ``torch.nn.Transformer``.

``TextbookTransformer`` is what the PyTorch tutorials write: ``nn.Transformer(batch_first=True)``
between token embeddings scaled by sqrt(d_model) plus sinusoidal positions, and an output
projection tied to the target embedding. Masks are made from the token ids on every call, the
way nn.Transformer wants them: ``src_key_padding_mask`` / ``tgt_key_padding_mask`` /
``memory_key_padding_mask`` (bool, True = padding, the opposite of our convention) and a bool
causal ``tgt_mask`` (True = future, hidden).

Two adjustments make it compute exactly our function (in training, up to token dropout), so
that it can be given our weights (``load_from``) and the benchmark compares implementations,
not models:

* nn.Transformer ends both stacks with a LayerNorm even in post-norm; ours has that final norm
  only in pre-norm (``norm_first``), so in post-norm it is removed here.
* nn.Transformer has one dropout rate; ours has three. The attention-weight dropout
  (``MultiheadAttention.dropout``), the FFN-inner dropout (``layer.dropout``) and the residual
  dropouts (``dropout1..3``) are set to ``attention_dropout``, ``activation_dropout`` and
  ``dropout``.
* Token dropout (``src_token_dropout``, ``tgt_token_dropout``) exists only in training and has
  no nn.Transformer counterpart, so it is left out: in the training benchmark ours does that
  extra work (one random draw and one fill per side and batch, too small to show).

The parameter layouts match: nn.MultiheadAttention's ``in_proj_weight`` stacks q, k, v like our
fused ``qkv``, and for cross-attention it is our ``q`` over our ``kv``.

In inference (eval, no grad) nn.Transformer takes its "fast path" (sources packed as nested
tensors, fused encoder layers). That path checks only for CUDA autocast and fails under CPU
autocast ("expected scalar type Float but found BFloat16", torch 2.13), so under CPU autocast it
is switched off here, as any user of nn.Transformer would have to.
"""

from __future__ import annotations

import contextlib
import math
import warnings
from collections.abc import Iterator

import torch
from torch import Tensor, nn

from mt_cli.config.sections import ModelConfig
from mt_cli.model.transformer import Transformer
from mt_cli.specials import BOS_ID, EOS_ID, NEVER_OUTPUT, PAD_ID


class TextbookTransformer(nn.Module):
    def __init__(self, cfg: ModelConfig, src_vocab_size: int, tgt_vocab_size: int) -> None:
        super().__init__()
        d = cfg.d_model
        self.scale = math.sqrt(d)
        self.tgt_embed = nn.Embedding(tgt_vocab_size, d)
        self.src_embed = self.tgt_embed if cfg.share_embeddings else nn.Embedding(src_vocab_size, d)
        for embedding in (self.src_embed, self.tgt_embed):
            nn.init.normal_(embedding.weight, std=d**-0.5)
        position = torch.arange(cfg.max_positions).unsqueeze(1)
        div_term = torch.exp(torch.arange(0, d, 2) * (-math.log(10000.0) / d))
        pe = torch.zeros(cfg.max_positions, d)
        pe[:, 0::2] = torch.sin(position * div_term)
        pe[:, 1::2] = torch.cos(position * div_term)
        self.register_buffer("pe", pe, persistent=False)
        self.dropout = nn.Dropout(cfg.dropout)
        with warnings.catch_warnings():  # "enable_nested_tensor is True, but ... norm_first was True"
            warnings.simplefilter("ignore", UserWarning)
            self.transformer = nn.Transformer(
                d_model=d,
                nhead=cfg.n_heads,
                num_encoder_layers=cfg.encoder_layers,
                num_decoder_layers=cfg.decoder_layers,
                dim_feedforward=cfg.d_ff,
                dropout=cfg.dropout,
                activation=cfg.activation,
                batch_first=True,
                norm_first=cfg.norm_first,
            )
        if not cfg.norm_first:
            self.transformer.encoder.norm = None
            self.transformer.decoder.norm = None
        for layer in [*self.transformer.encoder.layers, *self.transformer.decoder.layers]:
            layer.dropout.p = cfg.activation_dropout  # inside the FFN
            for attention in (layer.self_attn, getattr(layer, "multihead_attn", None)):
                if attention is not None:
                    attention.dropout = cfg.attention_dropout
        self.output = nn.Linear(d, tgt_vocab_size, bias=False)
        if cfg.tie_output:
            self.output.weight = self.tgt_embed.weight

    def _embed(self, embedding: nn.Embedding, tokens: Tensor) -> Tensor:
        return self.dropout(embedding(tokens) * self.scale + self.pe[: tokens.size(1)])

    def encode(self, src: Tensor) -> tuple[Tensor, Tensor]:
        """src (B, S) -> memory (B, S, D) and the source padding mask (B, S), True = pad."""
        src_pad = src == PAD_ID
        with _fast_path_guard(), warnings.catch_warnings():
            # The fast path packs padded sources as (prototype) nested tensors and says so each time.
            warnings.filterwarnings(
                "ignore", message="The PyTorch API of nested tensors", category=UserWarning
            )
            memory = self.transformer.encoder(self._embed(self.src_embed, src), src_key_padding_mask=src_pad)
        return memory, src_pad

    def decode(self, tgt_in: Tensor, memory: Tensor, src_pad: Tensor) -> Tensor:
        """tgt_in (B, T) -> decoder states (B, T, D), before the output projection."""
        length = tgt_in.size(1)
        causal = torch.ones(length, length, dtype=torch.bool, device=tgt_in.device).triu(1)
        with _fast_path_guard():
            return self.transformer.decoder(
                self._embed(self.tgt_embed, tgt_in),
                memory,
                tgt_mask=causal,
                tgt_key_padding_mask=tgt_in == PAD_ID,
                memory_key_padding_mask=src_pad,
                tgt_is_causal=True,
            )

    def forward(self, src: Tensor, tgt_in: Tensor) -> Tensor:
        """Teacher-forced logits (B, T, V); the masks come from the pad ids."""
        memory, src_pad = self.encode(src)
        return self.output(self.decode(tgt_in, memory, src_pad))

    def load_from(self, ours: Transformer) -> None:
        """Copy every parameter of our model into this one (the layouts match; see the module doc)."""
        pairs = list(self._pairs(ours))
        covered = {id(p) for p, _ in pairs}
        missing = [name for name, p in self.named_parameters() if id(p) not in covered]
        if missing:
            raise ValueError(f"no counterpart in our model for {', '.join(missing)}")
        with torch.no_grad():
            for theirs, mine in pairs:
                theirs.copy_(mine)

    def _pairs(self, ours: Transformer) -> Iterator[tuple[Tensor, Tensor]]:
        yield self.src_embed.weight, ours.src_embed.weight
        yield self.tgt_embed.weight, ours.tgt_embed.weight
        yield self.output.weight, ours.output.weight
        stacks = [
            (self.transformer.encoder, ours.encoder, ours.encoder_norm),
            (self.transformer.decoder, ours.decoder, ours.decoder_norm),
        ]
        for theirs, mine, final_norm in stacks:
            if theirs.norm is not None:
                yield from _same_names(theirs.norm, final_norm, "weight", "bias")
            for t, m in zip(theirs.layers, mine, strict=True):
                yield t.self_attn.in_proj_weight, m.self_attn.qkv.weight
                yield t.self_attn.in_proj_bias, m.self_attn.qkv.bias
                yield from _same_names(t.self_attn.out_proj, m.self_attn.out, "weight", "bias")
                if hasattr(t, "multihead_attn"):
                    cross = m.cross_attn
                    yield t.multihead_attn.in_proj_weight, torch.cat([cross.q.weight, cross.kv.weight])
                    yield t.multihead_attn.in_proj_bias, torch.cat([cross.q.bias, cross.kv.bias])
                    yield from _same_names(t.multihead_attn.out_proj, cross.out, "weight", "bias")
                    yield from _same_names(t.norm3, m.norm3, "weight", "bias")
                yield from _same_names(t.linear1, m.ffn.linear1, "weight", "bias")
                yield from _same_names(t.linear2, m.ffn.linear2, "weight", "bias")
                yield from _same_names(t.norm1, m.norm1, "weight", "bias")
                yield from _same_names(t.norm2, m.norm2, "weight", "bias")


@contextlib.contextmanager
def _fast_path_guard() -> Iterator[None]:
    """Switch nn.Transformer's inference fast path off while CPU autocast is on (see the module doc)."""
    try:
        cpu_autocast = torch.is_autocast_enabled("cpu")
    except TypeError:  # torch < 2.4
        cpu_autocast = torch.is_autocast_cpu_enabled()
    if not cpu_autocast:
        yield
        return
    before = torch.backends.mha.get_fastpath_enabled()
    torch.backends.mha.set_fastpath_enabled(False)
    try:
        yield
    finally:
        torch.backends.mha.set_fastpath_enabled(before)


def _same_names(theirs: nn.Module, mine: nn.Module, *names: str) -> Iterator[tuple[Tensor, Tensor]]:
    for name in names:
        yield getattr(theirs, name), getattr(mine, name)


def textbook_from(ours: Transformer, cfg: ModelConfig) -> TextbookTransformer:
    """A TextbookTransformer holding a copy of our model's weights, on the same device."""
    device = next(ours.parameters()).device
    model = TextbookTransformer(cfg, ours.src_vocab_size, ours.tgt_vocab_size).to(device)
    model.load_from(ours)
    return model


@torch.no_grad()
def naive_greedy_batch(model: TextbookTransformer, src: Tensor, limits: Tensor) -> list[list[int]]:
    """The tutorial loop, batched: re-run the whole decoder on the prefix at every step.

    src (B, S) padded with PAD; ``limits`` (B,) the most tokens each sentence may generate, EOS
    included (the last one is forced to EOS, as in our search). Finished sentences stay in the
    batch, fed EOS, until all are done. Returns ids without BOS/EOS.
    """
    memory, src_pad = model.encode(src)
    limits = limits.to(src.device)
    ys = torch.full((src.size(0), 1), BOS_ID, dtype=torch.long, device=src.device)  # (B, t)
    done = torch.zeros(src.size(0), dtype=torch.bool, device=src.device)
    for t in range(int(limits.max())):
        logits = model.output(model.decode(ys, memory, src_pad)[:, -1]).float()  # (B, V)
        log_probs = logits.log_softmax(-1)  # (B, V)
        log_probs[:, NEVER_OUTPUT] = float("-inf")  # as in our search: pad and <s> are never output
        token = torch.where(done | (limits <= t + 1), EOS_ID, log_probs.argmax(-1))
        ys = torch.cat([ys, token[:, None]], dim=1)
        done |= token == EOS_ID
        if bool(done.all()):
            break
    return [row[: row.index(EOS_ID)] for row in (ids + [EOS_ID] for ids in ys[:, 1:].tolist())]
