"""A Hugging Face Marian state dict -> the state dict of mt's ``Transformer``.

The reverse of ``export.huggingface`` (one small mapping function per kind of layer, the same
names), with two renumberings:

* The model dimension. Marian's position table puts every sin in the first half of the dims and
  every cos in the second, mt's interleaves them (dim 2j sin, 2j + 1 cos), with the same
  frequencies. mt's dim j is Marian's dim ``inverse[j]`` (the inverse of the export's
  permutation), applied to everything that reads or writes the residual stream: embeddings,
  output projection, every LayerNorm, q/k/v and fc1 inputs (columns), attention output and fc2
  outputs (rows and bias). Head dims are not the residual stream and stay. An imported model is
  then an ordinary mt model: every exporter handles it, and export after import gives back
  Marian's tensors bit for bit. (Marian computes its table in float64, mt in float32: they differ
  by up to 3e-6 in the first 64 positions and 3e-5 at position 511.)
* The vocabulary (optional): ``src_order``/``tgt_order`` from ``marian_vocab.mt_order`` pick, for
  each mt id, the Marian row of the embeddings, output projection and ``final_logits_bias``.

Marian's separate q/k/v projections are fused into mt's ``qkv`` (self) and ``kv`` (cross): both lay
each part out head by head, so concatenating is all it takes. Position tables are not weights in
either model and are ignored. A missing tensor, or one no mt parameter takes, is a ``CheckpointError``
naming it (``marian_checks`` has checked the shapes and values of the others before).
"""

from __future__ import annotations

from collections.abc import Mapping

import torch
from torch import Tensor

from mt_cli.errors import CheckpointError
from mt_cli.pretrained.marian_config import MarianSpec

Weights = dict[str, Tensor]  # mt parameter name -> fp32 tensor


class _Reader:
    """Hugging Face tensors by name, each as fp32, remembering which were read."""

    def __init__(self, weights: Mapping[str, Tensor]) -> None:
        self.weights = weights
        self.read: set[str] = set()

    def __call__(self, name: str, *aliases: str) -> Tensor:
        """The tensor under ``name``, else under the first of ``aliases`` (other names of one tied
        tensor) that the file has; all of them count as read."""
        present = [key for key in (name, *aliases) if key in self.weights]
        if present:
            self.read.update(present)
            return self.weights[present[0]].detach().float()
        raise CheckpointError(f"the Marian weights have no {name}; is the file complete?")

    def unread(self) -> list[str]:
        """Names no mt parameter took. Position tables are tables, not weights; a zero (or absent)
        ``final_logits_bias`` is a model without an output bias."""
        ignored = ("embed_positions.weight", "final_logits_bias")
        return sorted(k for k in self.weights if k not in self.read and not k.endswith(ignored))


def residual_inverse(d_model: int) -> Tensor:
    """(D,) index: mt's residual dim j is Marian's dim ``inverse[j]`` (the export's ``perm`` inverted)."""
    perm = torch.cat([torch.arange(0, d_model, 2), torch.arange(1, d_model, 2)])  # Marian dim i = mt perm[i]
    return torch.argsort(perm)


def mt_state_dict(
    weights: Mapping[str, Tensor],
    spec: MarianSpec,
    src_order: Tensor | None = None,
    tgt_order: Tensor | None = None,
) -> Weights:
    """mt's state dict for ``spec.model`` from Marian's ``weights``; ids renumbered by the orders
    (None: Marian's ids kept). The output bias is included when ``spec.model.output_bias``."""
    read = _Reader(weights)
    inverse = residual_inverse(spec.model.d_model)
    out = embedding_weights(read, spec, inverse, src_order, tgt_order)
    for i in range(spec.model.encoder_layers):
        out |= encoder_layer_weights(read, f"model.encoder.layers.{i}", f"encoder.{i}", inverse)
    for i in range(spec.model.decoder_layers):
        out |= decoder_layer_weights(read, f"model.decoder.layers.{i}", f"decoder.{i}", inverse)
    if extra := read.unread():
        more = f" and {len(extra) - 3} more" if len(extra) > 3 else ""
        named = ", ".join(name if name.isprintable() else repr(name) for name in extra[:3])
        raise CheckpointError(f"the Marian weights hold {named}{more}, which mt's model has no place for")
    return out


def embedding_weights(
    read: _Reader, spec: MarianSpec, inverse: Tensor, src_order: Tensor | None, tgt_order: Tensor | None
) -> Weights:
    """Token embeddings, output projection and bias. A tied or shared matrix is saved by
    transformers under one of its names only, so each is read under any of them."""
    m = spec.model
    shared = ("model.shared.weight",) if m.share_embeddings else ()
    src = read("model.encoder.embed_tokens.weight", *shared)  # (V_src, D)
    tgt = read("model.decoder.embed_tokens.weight", *shared)  # (V_tgt, D)
    out = {
        "src_embed.weight": _rows(src, src_order)[:, inverse],
        "tgt_embed.weight": _rows(tgt, tgt_order)[:, inverse],
    }
    if m.share_embeddings:
        if not _same_order(src_order, tgt_order):
            raise CheckpointError("a shared embedding needs one vocabulary order for both sides")
        out["src_embed.weight"] = out["tgt_embed.weight"]  # one Parameter in mt's model
    tied = ("model.decoder.embed_tokens.weight", *shared) if m.tie_output else ()
    lm_head = read("lm_head.weight", *tied)  # (V_tgt, D)
    out["output.weight"] = out["tgt_embed.weight"] if m.tie_output else _rows(lm_head, tgt_order)[:, inverse]
    if m.output_bias:
        bias = read("final_logits_bias")  # (1, V_tgt)
        out["output.bias"] = _rows(bias.reshape(-1, 1), tgt_order)[:, 0]
    return out


def encoder_layer_weights(read: _Reader, hf: str, mt: str, inverse: Tensor) -> Weights:
    return (
        self_attention_weights(read, f"{hf}.self_attn", f"{mt}.self_attn", inverse)
        | layer_norm_weights(read, f"{hf}.self_attn_layer_norm", f"{mt}.norm1", inverse)
        | feed_forward_weights(read, hf, f"{mt}.ffn", inverse)
        | layer_norm_weights(read, f"{hf}.final_layer_norm", f"{mt}.norm2", inverse)
    )


def decoder_layer_weights(read: _Reader, hf: str, mt: str, inverse: Tensor) -> Weights:
    return (
        self_attention_weights(read, f"{hf}.self_attn", f"{mt}.self_attn", inverse)
        | layer_norm_weights(read, f"{hf}.self_attn_layer_norm", f"{mt}.norm1", inverse)
        | cross_attention_weights(read, f"{hf}.encoder_attn", f"{mt}.cross_attn", inverse)
        | layer_norm_weights(read, f"{hf}.encoder_attn_layer_norm", f"{mt}.norm2", inverse)
        | feed_forward_weights(read, hf, f"{mt}.ffn", inverse)
        | layer_norm_weights(read, f"{hf}.final_layer_norm", f"{mt}.norm3", inverse)
    )


def self_attention_weights(read: _Reader, hf: str, mt: str, inverse: Tensor) -> Weights:
    """q, k, v fused into one (3D, D) projection: each reads the residual stream (columns renumbered)."""
    weight = torch.cat([read(f"{hf}.{p}_proj.weight")[:, inverse] for p in "qkv"])  # (3D, D)
    bias = torch.cat([read(f"{hf}.{p}_proj.bias") for p in "qkv"])  # (3D,)
    return {f"{mt}.qkv.weight": weight, f"{mt}.qkv.bias": bias} | _out_proj(read, hf, mt, inverse)


def cross_attention_weights(read: _Reader, hf: str, mt: str, inverse: Tensor) -> Weights:
    """q from the decoder stream, k and v fused (2D, D) from the encoder's: both renumbered."""
    kv = torch.cat([read(f"{hf}.{p}_proj.weight")[:, inverse] for p in "kv"])  # (2D, D)
    return {
        f"{mt}.q.weight": read(f"{hf}.q_proj.weight")[:, inverse],  # (D, D)
        f"{mt}.q.bias": read(f"{hf}.q_proj.bias"),  # (D,)
        f"{mt}.kv.weight": kv,
        f"{mt}.kv.bias": torch.cat([read(f"{hf}.{p}_proj.bias") for p in "kv"]),  # (2D,)
    } | _out_proj(read, hf, mt, inverse)


def _out_proj(read: _Reader, hf: str, mt: str, inverse: Tensor) -> Weights:
    """The output projection reads head dims and writes the residual stream (rows renumbered)."""
    return {
        f"{mt}.out.weight": read(f"{hf}.out_proj.weight")[inverse],  # (D, D)
        f"{mt}.out.bias": read(f"{hf}.out_proj.bias")[inverse],  # (D,)
    }


def feed_forward_weights(read: _Reader, hf: str, mt: str, inverse: Tensor) -> Weights:
    return {
        f"{mt}.linear1.weight": read(f"{hf}.fc1.weight")[:, inverse],  # (F, D)
        f"{mt}.linear1.bias": read(f"{hf}.fc1.bias"),  # (F,)
        f"{mt}.linear2.weight": read(f"{hf}.fc2.weight")[inverse],  # (D, F)
        f"{mt}.linear2.bias": read(f"{hf}.fc2.bias")[inverse],  # (D,)
    }


def layer_norm_weights(read: _Reader, hf: str, mt: str, inverse: Tensor) -> Weights:
    # Mean and variance do not depend on the order of the dims: only the affine part moves.
    return {f"{mt}.weight": read(f"{hf}.weight")[inverse], f"{mt}.bias": read(f"{hf}.bias")[inverse]}


def _rows(matrix: Tensor, order: Tensor | None) -> Tensor:
    """(V, D) rows in mt's order (V_mt, D), a fresh contiguous tensor either way."""
    return (matrix if order is None else matrix.index_select(0, order)).contiguous()


def _same_order(a: Tensor | None, b: Tensor | None) -> bool:
    return (a is None and b is None) or (a is not None and b is not None and torch.equal(a, b))
