"""The encoder-decoder Transformer and ``build_model``, the one place hyper-parameters are wired.

Shapes: B batch, S source length, T target length, D d_model, V target vocabulary size.
Masks are boolean, True = may attend: ``src_mask`` (B, 1, 1, S) is source key padding,
``tgt_mask`` (B, 1, T, T) is causal AND target key padding. They are built by the data collate;
the model only consumes them.

Embeddings: one per side (or one shared module with ``share_embeddings``), scaled by sqrt(D)
and drawn from N(0, D**-0.5) so that, with the tied output projection, the first logits have
unit scale. The pad row is zeroed at init but is not frozen (no ``padding_idx``): padding is
masked out of attention and the loss, so its vector never reaches a real position.

Output projection: no bias. With ``tie_output`` it *is* the target embedding matrix (the same
Parameter); otherwise its own matrix with the same init.

Logits come out in the compute dtype (bf16 under autocast; ``cross_entropy`` upcasts), except
``step`` which returns fp32 since decoding accumulates log-probabilities.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from mt_cli.cache import DecoderCache
from mt_cli.config import ModelConfig
from mt_cli.dropout import Dropout, TokenDropout
from mt_cli.errors import ConfigError
from mt_cli.layers import DecoderLayer, EncoderLayer, PositionalEncoding
from mt_cli.tokenizer import EOS_ID, PAD_ID, UNK_ID


class Transformer(nn.Module):
    """Vaswani et al. (2017) encoder-decoder, post-norm by default, pre-norm with ``norm_first``."""

    def __init__(
        self,
        *,
        src_vocab_size: int,
        tgt_vocab_size: int,
        d_model: int,
        n_heads: int,
        d_ff: int,
        encoder_layers: int,
        decoder_layers: int,
        dropout: float = 0.1,
        attention_dropout: float = 0.0,
        activation_dropout: float = 0.0,
        src_token_dropout: float = 0.0,
        tgt_token_dropout: float = 0.0,
        activation: str = "relu",
        norm_first: bool = False,
        tie_output: bool = True,
        share_embeddings: bool = False,
        max_positions: int = 256,
        pad_id: int = 0,
        unk_id: int = 1,
        first_word_id: int = 4,
    ) -> None:
        super().__init__()
        if share_embeddings and src_vocab_size != tgt_vocab_size:
            raise ValueError(
                f"share_embeddings needs equal vocab sizes, got {src_vocab_size} and {tgt_vocab_size}"
            )
        self.src_vocab_size = src_vocab_size
        self.tgt_vocab_size = tgt_vocab_size
        self.max_positions = max_positions
        self.pad_id = pad_id
        self.d_model = d_model
        self.embed_scale = math.sqrt(d_model)

        self.tgt_embed = nn.Embedding(tgt_vocab_size, d_model)
        self.src_embed = self.tgt_embed if share_embeddings else nn.Embedding(src_vocab_size, d_model)
        self.positions = PositionalEncoding(d_model, max_positions)
        self.dropout = Dropout(dropout)
        self.src_token_dropout = TokenDropout(src_token_dropout, unk_id, first_word_id)
        self.tgt_token_dropout = TokenDropout(tgt_token_dropout, unk_id, first_word_id)

        layer_args = dict(
            dropout=dropout,
            attention_dropout=attention_dropout,
            activation_dropout=activation_dropout,
            activation=activation,
            norm_first=norm_first,
        )
        self.encoder = nn.ModuleList(
            EncoderLayer(d_model, n_heads, d_ff, **layer_args) for _ in range(encoder_layers)
        )
        self.decoder = nn.ModuleList(
            DecoderLayer(d_model, n_heads, d_ff, **layer_args) for _ in range(decoder_layers)
        )
        # Pre-norm leaves the residual stream unnormalised, so each stack ends with a LayerNorm.
        self.encoder_norm: nn.Module = nn.LayerNorm(d_model) if norm_first else nn.Identity()
        self.decoder_norm: nn.Module = nn.LayerNorm(d_model) if norm_first else nn.Identity()

        self.output = nn.Linear(d_model, tgt_vocab_size, bias=False)
        self._init_embeddings()
        if tie_output:
            self.output.weight = self.tgt_embed.weight

    def _init_embeddings(self) -> None:
        std = self.d_model**-0.5
        for weight in (self.src_embed.weight, self.tgt_embed.weight, self.output.weight):
            nn.init.normal_(weight, mean=0.0, std=std)
        with torch.no_grad():
            self.src_embed.weight[self.pad_id].zero_()
            self.tgt_embed.weight[self.pad_id].zero_()

    def _embed(self, embedding: nn.Module, tokens: Tensor, offset: int = 0) -> Tensor:
        x = embedding(tokens) * self.embed_scale  # (B, L, D)
        return self.dropout(self.positions(x, offset))  # (B, L, D)

    def encode(self, src: Tensor, src_mask: Tensor) -> Tensor:
        """src (B, S), src_mask (B, 1, 1, S) -> memory (B, S, D)."""
        x = self._embed(self.src_embed, self.src_token_dropout(src))  # (B, S, D)
        for layer in self.encoder:
            x = layer(x, src_mask)
        return self.encoder_norm(x)

    def decode(self, tgt_in: Tensor, memory: Tensor, src_mask: Tensor, tgt_mask: Tensor) -> Tensor:
        """tgt_in (B, T), memory (B, S, D), src_mask (B, 1, 1, S), tgt_mask (B, 1, T, T) -> logits (B, T, V)."""
        x = self._embed(self.tgt_embed, self.tgt_token_dropout(tgt_in))  # (B, T, D)
        for layer in self.decoder:
            x = layer(x, memory, src_mask, tgt_mask)
        return self.output(self.decoder_norm(x))  # (B, T, V)

    def forward(self, src: Tensor, tgt_in: Tensor, src_mask: Tensor, tgt_mask: Tensor) -> Tensor:
        """Teacher-forced logits (B, T, V) for tgt_in (B, T) given src (B, S)."""
        return self.decode(tgt_in, self.encode(src, src_mask), src_mask, tgt_mask)

    def start_cache(self, memory: Tensor, src_mask: Tensor) -> DecoderCache:
        """A cache holding every decoder layer's cross-attention k/v of memory (B, S, D)."""
        return DecoderCache([layer.start_cache(memory) for layer in self.decoder], src_mask, 0)

    def step(
        self, tokens: Tensor, cache: DecoderCache, return_attention: bool = False
    ) -> tuple[Tensor, DecoderCache, Tensor | None]:
        """Feed tokens (B*beams,), one per hypothesis, at position ``cache.length``.

        Returns fp32 logits (B, V) for the next position, the extended cache and, if asked, the
        last decoder layer's cross-attention weights averaged over heads (B, S).
        """
        x = self._embed(self.tgt_embed, tokens[:, None], offset=cache.length)  # (B, 1, D)
        last = len(self.decoder) - 1
        layers = []
        weights = None
        for i, (layer, layer_cache) in enumerate(zip(self.decoder, cache.layers, strict=True)):
            x, layer_cache, w = layer.step(
                x, layer_cache, cache.src_mask, cache.length, return_attention and i == last
            )
            layers.append(layer_cache)
            if w is not None:
                weights = w.mean(dim=1)[:, 0].float()  # (B, H, 1, S) -> (B, S)
        logits = self.output(self.decoder_norm(x[:, 0])).float()  # (B, V)
        return logits, DecoderCache(layers, cache.src_mask, cache.length + 1, cache.beams), weights


def build_model(cfg: ModelConfig, src_vocab_size: int, tgt_vocab_size: int) -> Transformer:
    """The Transformer described by ``cfg`` for the given vocabularies (pad id 0)."""
    if cfg.share_embeddings and src_vocab_size != tgt_vocab_size:
        raise ConfigError(
            "model.share_embeddings needs equal source and target vocabularies "
            f"(got {src_vocab_size} and {tgt_vocab_size}); set model.share_embeddings=false"
        )
    if cfg.d_model % cfg.n_heads:
        raise ConfigError(f"model.d_model={cfg.d_model} is not divisible by model.n_heads={cfg.n_heads}")
    if cfg.d_model % 2:
        raise ConfigError(f"model.d_model={cfg.d_model} must be even (sinusoidal positions)")
    if min(src_vocab_size, tgt_vocab_size) < 4:
        raise ConfigError(
            f"vocabularies of {src_vocab_size} and {tgt_vocab_size} cannot hold pad/unk/bos/eos"
        )
    return Transformer(
        src_vocab_size=src_vocab_size,
        tgt_vocab_size=tgt_vocab_size,
        d_model=cfg.d_model,
        n_heads=cfg.n_heads,
        d_ff=cfg.d_ff,
        encoder_layers=cfg.encoder_layers,
        decoder_layers=cfg.decoder_layers,
        dropout=cfg.dropout,
        attention_dropout=cfg.attention_dropout,
        activation_dropout=cfg.activation_dropout,
        src_token_dropout=cfg.src_token_dropout,
        tgt_token_dropout=cfg.tgt_token_dropout,
        activation=cfg.activation,
        norm_first=cfg.norm_first,
        tie_output=cfg.tie_output,
        share_embeddings=cfg.share_embeddings,
        max_positions=cfg.max_positions,
        pad_id=PAD_ID,
        unk_id=UNK_ID,
        first_word_id=EOS_ID + 1,
    )


def count_parameters(model: nn.Module) -> int:
    """Number of trainable scalars, each shared (tied) Parameter counted once."""
    unique = {id(p): p for _, p in model.named_parameters(remove_duplicate=False)}
    return sum(p.numel() for p in unique.values() if p.requires_grad)
