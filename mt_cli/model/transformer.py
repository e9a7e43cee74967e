"""The encoder-decoder Transformer, built from a ``ModelConfig`` by ``build_model``.

Shapes: B batch, S source length, T target length, D d_model, V target vocabulary size.
Masks are boolean, True = may attend: ``src_mask`` (B, 1, 1, S) is source key padding,
``tgt_mask`` (B, 1, T, T) is causal AND target key padding. They are built by the data collate;
the model only consumes them.

Embeddings: one per side (or one shared module with ``share_embeddings``), scaled by sqrt(D)
(unless ``scale_embeddings`` is off, as in some published models) and drawn from N(0, D**-0.5) so
that, with the tied output projection, the first logits have unit scale. The pad row is zeroed
at init but is not frozen (no ``padding_idx``): padding is masked out of attention and the loss,
so its vector never reaches a real position.

Output projection: no bias unless ``output_bias`` (then ``output.bias``, zero at init: Marian's
``final_logits_bias``; a model without the option has no such parameter, so its checkpoints are
as before). With ``tie_output`` the matrix *is* the target embedding matrix (the same
Parameter); otherwise its own matrix with the same init.

The first decoder input is always <s>: a Marian import (``pretrained``), whose decoder starts from
pad, has Marian's start vector at <s>.

Logits come out in the compute dtype (bf16 under autocast; ``cross_entropy`` upcasts), except
``step`` which returns fp32 since decoding accumulates log-probabilities.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from mt_cli.config.sections import ModelConfig
from mt_cli.model.attention import source_bias
from mt_cli.model.cache import DecoderCache
from mt_cli.model.dropout import Dropout, TokenDropout
from mt_cli.model.layers import DecoderLayer, EncoderLayer, PositionalEncoding
from mt_cli.model.packed import Linear
from mt_cli.specials import FIRST_WORD_ID, PAD_ID, UNK_ID

# Sources per encoder pass when decoding: enough rows for full-speed matrix products.
ENCODE_ROWS = 64


class Transformer(nn.Module):
    """Vaswani et al. (2017) encoder-decoder, post-norm by default, pre-norm with ``norm_first``.

    Reads its sizes from a ``ModelConfig`` and hands the config on to its layers; the config
    has checked them (``rules.check_model``), so they are not checked again here.
    """

    def __init__(self, cfg: ModelConfig, src_vocab_size: int, tgt_vocab_size: int) -> None:
        super().__init__()
        self.src_vocab_size = src_vocab_size
        self.tgt_vocab_size = tgt_vocab_size
        self.max_positions = cfg.max_positions
        self.d_model = cfg.d_model
        self.embed_scale = math.sqrt(cfg.d_model) if cfg.scale_embeddings else 1.0

        self.tgt_embed = nn.Embedding(tgt_vocab_size, cfg.d_model)
        self.src_embed = self.tgt_embed if cfg.share_embeddings else nn.Embedding(src_vocab_size, cfg.d_model)
        self.positions = PositionalEncoding(cfg.d_model, cfg.max_positions)
        self.dropout = Dropout(cfg.dropout)
        self.src_token_dropout = TokenDropout(
            cfg.src_token_dropout, UNK_ID, FIRST_WORD_ID, cfg.src_token_replace, src_vocab_size
        )
        self.tgt_token_dropout = TokenDropout(
            cfg.tgt_token_dropout, UNK_ID, FIRST_WORD_ID, cfg.tgt_token_replace, tgt_vocab_size
        )
        self.encoder = nn.ModuleList(EncoderLayer(cfg) for _ in range(cfg.encoder_layers))
        self.decoder = nn.ModuleList(DecoderLayer(cfg) for _ in range(cfg.decoder_layers))
        # Pre-norm leaves the residual stream unnormalised, so each stack ends with a LayerNorm.
        self.encoder_norm: nn.Module = nn.LayerNorm(cfg.d_model) if cfg.norm_first else nn.Identity()
        self.decoder_norm: nn.Module = nn.LayerNorm(cfg.d_model) if cfg.norm_first else nn.Identity()

        self.output = Linear(cfg.d_model, tgt_vocab_size, bias=cfg.output_bias)
        self._init_embeddings()
        if cfg.tie_output:
            self.output.weight = self.tgt_embed.weight

    def _init_embeddings(self) -> None:
        std = self.d_model**-0.5
        for weight in (self.src_embed.weight, self.tgt_embed.weight, self.output.weight):
            nn.init.normal_(weight, mean=0.0, std=std)
        with torch.no_grad():
            self.src_embed.weight[PAD_ID].zero_()
            self.tgt_embed.weight[PAD_ID].zero_()
            if self.output.bias is not None:  # no prior over the vocabulary before training
                self.output.bias.zero_()

    def _embed(self, embedding: nn.Module, tokens: Tensor, offset: int = 0) -> Tensor:
        x = embedding(tokens) * self.embed_scale  # (B, L, D)
        return self.dropout(self.positions(x, offset))  # (B, L, D)

    def encode(self, src: Tensor, src_mask: Tensor) -> Tensor:
        """src (B, S), src_mask (B, 1, 1, S) -> memory (B, S, D); padding on the right.

        In eval mode a batch of more than ``ENCODE_ROWS`` sources is encoded in groups of that
        many, by length, each cut to its own longest source: a decoding batch of 546 test2016
        sources held 30% padding. The memory at padding positions is then zero, not whatever
        the layers made of the pad embedding: attention masks it either way.
        """
        if self.training or src.size(0) <= ENCODE_ROWS:
            return self._encode(src, src_mask)
        lengths = src_mask.view(src.size(0), -1).sum(-1)  # (B,)
        groups = lengths.argsort(stable=True).split(ENCODE_ROWS)
        widths = [int(lengths[rows].max()) for rows in groups]
        parts = [self._encode(src[rows, :w], src_mask[rows, ..., :w]) for rows, w in zip(groups, widths)]
        memory = parts[0].new_zeros(*src.shape, self.d_model)  # (B, S, D), in the encoder's dtype
        for rows, width, part in zip(groups, widths, parts):
            memory[rows, :width] = part
        return memory

    def _encode(self, src: Tensor, src_mask: Tensor) -> Tensor:
        x = self._embed(self.src_embed, self.src_token_dropout(src))  # (B, S, D)
        for layer in self.encoder:
            x = layer(x, src_mask)
        return self.encoder_norm(x)

    def decode(self, tgt_in: Tensor, memory: Tensor, src_mask: Tensor, tgt_mask: Tensor) -> Tensor:
        """tgt_in (B, T), memory (B, S, D), src_mask (B, 1, 1, S), tgt_mask (B, 1, T, T) -> (B, T, V)."""
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
        self,
        tokens: Tensor,
        cache: DecoderCache,
        return_attention: bool = False,
        attention_layer: int | None = None,
    ) -> tuple[Tensor, DecoderCache, Tensor | None]:
        """Feed tokens (B*beams,), one per hypothesis, at position ``cache.length``.

        Returns fp32 logits (B, V) for the next position, the extended cache and, if asked, the
        cross-attention weights averaged over heads (B, S) of decoder layer ``attention_layer``
        (an index into the decoder layers, negative from the end; None: the last, as fairseq).
        """
        x = self._embed(self.tgt_embed, tokens[:, None], offset=cache.length)  # (B, 1, D)
        chosen = self.decoder_layer_index(attention_layer) if return_attention else -1
        layers = []
        weights = None
        bias = source_bias(cache.src_mask, cache.layers[0].cross_k.dtype)  # (B, 1, 1, S), once a step
        for i, (layer, layer_cache) in enumerate(zip(self.decoder, cache.layers, strict=True)):
            x, layer_cache, w = layer.step(
                x, layer_cache, bias, cache.length, return_attention and i == chosen
            )
            layers.append(layer_cache)
            if w is not None:
                weights = w.mean(dim=1)[:, 0].float()  # (B, H, 1, S) -> (B, S)
        logits = self.output(self.decoder_norm(x[:, 0])).float()  # (B, V)
        return logits, DecoderCache(layers, cache.src_mask, cache.length + 1, cache.beams), weights

    def decoder_layer_index(self, layer: int | None) -> int:
        """The decoder layer ``layer`` names: None is the last, negative counts from the end."""
        count = len(self.decoder)
        if layer is None:
            return count - 1
        if not -count <= layer < count:
            raise ValueError(f"decoder layer {layer} does not exist; the decoder has {count} layers")
        return layer % count


def build_model(cfg: ModelConfig, src_vocab_size: int, tgt_vocab_size: int) -> Transformer:
    """The Transformer described by ``cfg`` for vocabularies of the given sizes."""
    return Transformer(cfg, src_vocab_size, tgt_vocab_size)


def count_parameters(model: nn.Module) -> int:
    """Number of trainable scalars, each shared (tied) Parameter counted once."""
    unique = {id(p): p for _, p in model.named_parameters(remove_duplicate=False)}
    return sum(p.numel() for p in unique.values() if p.requires_grad)
