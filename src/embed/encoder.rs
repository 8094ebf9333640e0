//! The transformer of a model directory, run by candle on the CPU in `f32`: token ids of a
//! padded batch in, one hidden state per token out.
//!
//! BERT (`bert`: MiniLM, bge-*-en, e5-*-v2) uses `candle_transformers::models::bert`;
//! XLM-RoBERTa (`xlm-roberta`: multilingual-e5, bge-m3) `…::xlm_roberta`, whose positions start
//! after the padding id as RoBERTa's do. The weights (`model.safetensors`) are memory-mapped,
//! not copied: the page cache holds them once, whatever the number of processes.

use candle_core::{DType, Device, Tensor};
use candle_nn::VarBuilder;
use candle_transformers::models::{bert, xlm_roberta};

use super::layout::{Arch, Layout};

/// A loaded encoder.
pub enum Encoder {
    Bert(bert::BertModel),
    XlmRoberta(xlm_roberta::XLMRobertaModel),
}

/// A padded batch: `rows × len` token ids and attention mask (1 real, 0 padding), row-major.
pub struct Batch {
    pub rows: usize,
    pub len: usize,
    pub ids: Vec<u32>,
    pub mask: Vec<u32>,
}

impl Encoder {
    /// Loads `config.json` and `model.safetensors` of `layout.dir`; errors name the file.
    pub fn load(layout: &Layout) -> Result<Encoder, String> {
        let config_path = layout.dir.join("config.json");
        let config = std::fs::read_to_string(&config_path).map_err(|e| format!("{}: {e}", config_path.display()))?;
        let weights = layout.dir.join("model.safetensors");
        let bad = |e: &dyn std::fmt::Display| format!("{}: {e}", weights.display());
        // SAFETY: the file is mapped read-only; replacing it while the process runs is the
        // operator's error, as for any mapped file (the model is read once, at load).
        let vb = unsafe { VarBuilder::from_mmaped_safetensors(&[&weights], DType::F32, &Device::Cpu) }
            .map_err(|e| bad(&e))?;
        let cfg_err = |e: serde_json::Error| format!("{}: {e}", config_path.display());
        match layout.arch {
            Arch::Bert => {
                let cfg: bert::Config = serde_json::from_str(&config).map_err(cfg_err)?;
                bert::BertModel::load(vb, &cfg).map(Encoder::Bert).map_err(|e| bad(&e))
            }
            Arch::XlmRoberta => {
                let cfg: xlm_roberta::Config = serde_json::from_str(&config).map_err(cfg_err)?;
                let vb =
                    if vb.contains_tensor("roberta.embeddings.word_embeddings.weight") { vb.pp("roberta") } else { vb };
                xlm_roberta::XLMRobertaModel::new(&cfg, vb).map(Encoder::XlmRoberta).map_err(|e| bad(&e))
            }
        }
    }

    /// Hidden states of `batch`: `rows × len × dim` values, row-major.
    pub fn forward(&self, batch: &Batch) -> candle_core::Result<Vec<f32>> {
        let shape = (batch.rows, batch.len);
        let ids = Tensor::from_slice(&batch.ids, shape, &Device::Cpu)?;
        let mask = Tensor::from_slice(&batch.mask, shape, &Device::Cpu)?;
        let types = ids.zeros_like()?;
        let states = match self {
            Encoder::Bert(m) => m.forward(&ids, &types, Some(&mask))?,
            Encoder::XlmRoberta(m) => m.forward(&ids, &mask, &types, None, None, None)?,
        };
        states.flatten_all()?.to_vec1::<f32>()
    }
}
