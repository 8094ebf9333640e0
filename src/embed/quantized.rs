//! The encoder's forward pass on 8-bit weights ([`Kernel::Int8Avx2`](super::encoder::Kernel)),
//! on plain slices: the arithmetic of [`super::encoder`]'s `f32` pass, each step one call to a
//! kernel of `replicad_kernels` that writes a buffer of its own.
//!
//! Embeddings summed and normalised; then per layer: one 8-bit product for the queries, keys
//! and values side by side (`hidden → 3 · hidden`: the three weight matrices stacked, each output
//! quantized on its own as before), attention read straight from it, the attention's output
//! product, the residual added and normalised in one pass, the feed-forward products with GELU
//! in place, and the second residual and normalisation. Built on candle's tensors, the same pass
//! spent a third of a question's 4.7 ms outside the products: a dozen tensor operations per
//! layer (reshapes into heads and back, copies, broadcast adds), each allocating and dispatching;
//! here there are none, and attention and the softmax run in AVX2 (`examples/embed_bench.rs`
//! measures both, the module [`super`] gives the figures).

use candle_nn::VarBuilder;
use replicad_kernels::attention::{attention, Shape};
use replicad_kernels::int8::Linear;
use replicad_kernels::norm::LayerNorm;

use super::encoder::{Activation, Batch, Config};

/// The loaded network.
pub(super) struct Network {
    dim: usize,
    heads: usize,
    activation: Activation,
    /// `vocab × dim` rows.
    word: Vec<f32>,
    /// `max_positions × dim` rows.
    position: Vec<f32>,
    /// The token type 0's row (every text is one segment).
    token_type: Vec<f32>,
    embeddings_norm: LayerNorm,
    layers: Vec<Layer>,
}

/// One transformer layer (post-norm, as BERT).
struct Layer {
    /// Queries, keys and values: `hidden → 3 · hidden`.
    qkv: Linear,
    attention_out: Linear,
    attention_norm: LayerNorm,
    intermediate: Linear,
    output: Linear,
    output_norm: LayerNorm,
}

/// The tensor `name` of `vb`, of `shape`, as a flat vector (row-major).
fn values(vb: &VarBuilder, shape: impl Into<candle_core::Shape>, name: &str) -> candle_core::Result<Vec<f32>> {
    vb.get(shape, name)?.flatten_all()?.to_vec1::<f32>()
}

/// The layer normalisation under `vb` (`weight`, `bias`).
fn layer_norm(vb: VarBuilder, dim: usize, eps: f64) -> candle_core::Result<LayerNorm> {
    Ok(LayerNorm::new(values(&vb, dim, "weight")?, values(&vb, dim, "bias")?, eps as f32))
}

/// The linear layers under `names` of `vb` stacked (outputs one after the other), quantized.
fn linear(vb: &VarBuilder, names: &[&str], inputs: usize, outputs: usize) -> candle_core::Result<Linear> {
    let (mut weight, mut bias) = (Vec::new(), Vec::new());
    for name in names {
        let v = vb.pp(*name);
        weight.extend(values(&v, (outputs, inputs), "weight")?);
        bias.extend(values(&v, outputs, "bias")?);
    }
    Ok(Linear::quantize(&weight, &bias, outputs * names.len(), inputs))
}

impl Layer {
    fn load(vb: VarBuilder, c: &Config) -> candle_core::Result<Layer> {
        let (h, i, eps) = (c.hidden_size, c.intermediate_size, c.layer_norm_eps);
        let attention = vb.pp("attention");
        Ok(Layer {
            qkv: linear(&attention.pp("self"), &["query", "key", "value"], h, h)?,
            attention_out: linear(&attention.pp("output"), &["dense"], h, h)?,
            attention_norm: layer_norm(attention.pp("output").pp("LayerNorm"), h, eps)?,
            intermediate: linear(&vb.pp("intermediate"), &["dense"], h, i)?,
            output: linear(&vb.pp("output"), &["dense"], i, h)?,
            output_norm: layer_norm(vb.pp("output").pp("LayerNorm"), h, eps)?,
        })
    }

    /// `x`: `tokens × dim` hidden states in, the layer's out.
    fn forward(&self, x: &[f32], mask: &[u32], shape: Shape, activation: Activation) -> Vec<f32> {
        let tokens = shape.rows * shape.len;
        let qkv = self.qkv.forward(x, tokens);
        let mut context = vec![0f32; x.len()];
        attention(&qkv, mask, shape, &mut context);
        let mut attended = self.attention_out.forward(&context, tokens);
        self.attention_norm.forward_residual(&mut attended, Some(x));
        let mut hidden = self.intermediate.forward(&attended, tokens);
        activation.apply_in_place(&mut hidden);
        let mut out = self.output.forward(&hidden, tokens);
        self.output_norm.forward_residual(&mut out, Some(&attended));
        out
    }
}

impl Network {
    /// The weights under `vb` (named as transformers saves a BERT), the linear layers quantized.
    pub(super) fn load(vb: VarBuilder, c: &Config) -> candle_core::Result<Network> {
        let h = c.hidden_size;
        let e = vb.pp("embeddings");
        let token_type = values(&e.pp("token_type_embeddings"), (c.type_vocab_size, h), "weight")?;
        Ok(Network {
            dim: h,
            heads: c.num_attention_heads,
            activation: c.hidden_act,
            word: values(&e.pp("word_embeddings"), (c.vocab_size, h), "weight")?,
            position: values(&e.pp("position_embeddings"), (c.max_position_embeddings, h), "weight")?,
            token_type: token_type[..h].to_vec(),
            embeddings_norm: layer_norm(e.pp("LayerNorm"), h, c.layer_norm_eps)?,
            layers: (0..c.num_hidden_layers)
                .map(|i| Layer::load(vb.pp("encoder").pp("layer").pp(i), c))
                .collect::<candle_core::Result<_>>()?,
        })
    }

    /// Hidden states of `batch` (`positions`: one position id per token): `rows × len × dim`
    /// values, row-major. Errors if a token or position id is beyond the model's tables.
    pub(super) fn forward(&self, batch: &Batch, positions: &[u32]) -> candle_core::Result<Vec<f32>> {
        let dim = self.dim;
        let mut x = vec![0f32; batch.ids.len() * dim];
        for ((row, &id), &pos) in x.chunks_exact_mut(dim).zip(&batch.ids).zip(positions) {
            let (id, pos) = (id as usize, pos as usize);
            let beyond = |what: &str| candle_core::Error::Msg(format!("{what} beyond the model's embeddings"));
            let word = self.word.get(id * dim..(id + 1) * dim).ok_or_else(|| beyond(&format!("token id {id}")))?;
            let position =
                self.position.get(pos * dim..(pos + 1) * dim).ok_or_else(|| beyond(&format!("position {pos}")))?;
            for (((v, w), t), p) in row.iter_mut().zip(word).zip(&self.token_type).zip(position) {
                *v = w + t + p;
            }
        }
        self.embeddings_norm.forward(&mut x);
        let shape = Shape { rows: batch.rows, len: batch.len, heads: self.heads, head_dim: dim / self.heads };
        for layer in &self.layers {
            x = layer.forward(&x, &batch.mask, shape, self.activation);
        }
        Ok(x)
    }
}
