//! Loading a Llama-architecture GGUF: metadata to [`LlamaConfig`], weights dequantized to
//! float and renamed to the Hugging Face layout (Q/K rows un-permuted from llama.cpp's
//! interleaved-rope order back to the half-split order the model uses).

use crate::error::{PolicyError, Result};
use crate::model::{Family, Llama, LlamaConfig};
use crate::tokenizer::Tokenizer;
use candle_core::quantized::gguf_file::{Content, Value};
use candle_core::{DType, Device, Tensor};
use std::path::{Path, PathBuf};

/// An opened GGUF file: parsed header plus a reader for tensor data.
pub struct GgufFile {
    pub path: PathBuf,
    pub content: Content,
    reader: std::io::BufReader<std::fs::File>,
}

impl GgufFile {
    pub fn open(path: &Path) -> Result<Self> {
        let file = std::fs::File::open(path).map_err(|e| PolicyError::io(path, e))?;
        let mut reader = std::io::BufReader::new(file);
        let content = Content::read(&mut reader).map_err(|e| PolicyError::Gguf {
            path: path.to_path_buf(),
            msg: format!("not a readable GGUF file: {e}"),
        })?;
        Ok(Self {
            path: path.to_path_buf(),
            content,
            reader,
        })
    }

    fn err(&self, msg: impl Into<String>) -> PolicyError {
        PolicyError::Gguf {
            path: self.path.clone(),
            msg: msg.into(),
        }
    }

    fn meta(&self, key: &str) -> Result<&Value> {
        self.content
            .metadata
            .get(key)
            .ok_or_else(|| self.err(format!("missing metadata `{key}`")))
    }

    fn meta_usize(&self, key: &str) -> Result<usize> {
        let v = self.meta(key)?;
        v.to_u32()
            .map(|x| x as usize)
            .or_else(|_| v.to_u64().map(|x| x as usize))
            .map_err(|_| self.err(format!("metadata `{key}` is not an integer")))
    }

    fn meta_f64(&self, key: &str) -> Result<f64> {
        let v = self.meta(key)?;
        v.to_f32()
            .map(|x| x as f64)
            .or_else(|_| v.to_f64())
            .map_err(|_| self.err(format!("metadata `{key}` is not a float")))
    }

    /// `general.architecture`.
    pub fn architecture(&self) -> Result<String> {
        Ok(self
            .meta("general.architecture")?
            .to_string()
            .map_err(|_| self.err("bad architecture"))?
            .clone())
    }

    /// The model shape from `llama.*` metadata and the embedding tensor.
    pub fn llama_config(&self) -> Result<LlamaConfig> {
        let arch = self.architecture()?;
        if arch != "llama" {
            return Err(self.err(format!(
                "unsupported architecture: metadata `general.architecture` is `{arch}`, only \
                 `llama` GGUF files are supported (pass other models as Hugging Face folders)"
            )));
        }
        let hidden = self.meta_usize("llama.embedding_length")?;
        let heads = self.meta_usize("llama.attention.head_count")?;
        let kv_heads = self
            .meta_usize("llama.attention.head_count_kv")
            .unwrap_or(heads);
        let head_dim = match self.meta_usize("llama.rope.dimension_count") {
            Ok(d) => d,
            Err(_) => hidden / heads.max(1),
        };
        let embed = self
            .content
            .tensor_infos
            .get("token_embd.weight")
            .ok_or_else(|| self.err("missing tensor token_embd.weight"))?;
        let vocab = embed.shape.dims()[0];
        Ok(LlamaConfig {
            family: Family::Llama,
            vocab_size: vocab,
            hidden_size: hidden,
            intermediate_size: self.meta_usize("llama.feed_forward_length")?,
            num_layers: self.meta_usize("llama.block_count")?,
            num_heads: heads,
            num_kv_heads: kv_heads,
            head_dim,
            rope_theta: self.meta_f64("llama.rope.freq_base").unwrap_or(10_000.0),
            rms_norm_eps: self.meta_f64("llama.attention.layer_norm_rms_epsilon")?,
            max_position: self.meta_usize("llama.context_length")?,
            tie_word_embeddings: !self.content.tensor_infos.contains_key("output.weight"),
        })
    }

    /// A tensor dequantized to f32.
    pub fn tensor_f32(&mut self, name: &str) -> Result<Tensor> {
        let q = self
            .content
            .tensor(&mut self.reader, name, &Device::Cpu)
            .map_err(|e| PolicyError::Gguf {
                path: self.path.clone(),
                msg: format!("tensor {name}: {e}"),
            })?;
        Ok(q.dequantize(&Device::Cpu)?)
    }

    pub fn tokenizer(&self) -> Result<Tokenizer> {
        Tokenizer::from_gguf(&self.content)
    }

    /// Load the model with weights dequantized and converted to `dtype`.
    pub fn load_llama(&mut self, dtype: DType, device: &Device) -> Result<Llama> {
        let cfg = self.llama_config()?;
        let (nh, nkv) = (cfg.num_heads, cfg.num_kv_heads);
        Llama::from_weights(cfg, dtype, device, |name, _shape| {
            let (gguf_name, unpermute_heads) = hf_to_gguf_name(name)
                .ok_or_else(|| self.err(format!("no GGUF tensor for {name}")))?;
            let t = self.tensor_f32(&gguf_name)?;
            match unpermute_heads {
                Some(HeadKind::Q) => unpermute_rope_rows(&t, nh),
                Some(HeadKind::K) => unpermute_rope_rows(&t, nkv),
                None => Ok(t),
            }
        })
    }
}

enum HeadKind {
    Q,
    K,
}

fn hf_to_gguf_name(name: &str) -> Option<(String, Option<HeadKind>)> {
    match name {
        "model.embed_tokens.weight" => return Some(("token_embd.weight".into(), None)),
        "model.norm.weight" => return Some(("output_norm.weight".into(), None)),
        "lm_head.weight" => return Some(("output.weight".into(), None)),
        _ => {}
    }
    let rest = name.strip_prefix("model.layers.")?;
    let (layer, leaf) = rest.split_once('.')?;
    let (g, kind) = match leaf {
        "input_layernorm.weight" => ("attn_norm", None),
        "self_attn.q_proj.weight" => ("attn_q", Some(HeadKind::Q)),
        "self_attn.k_proj.weight" => ("attn_k", Some(HeadKind::K)),
        "self_attn.v_proj.weight" => ("attn_v", None),
        "self_attn.o_proj.weight" => ("attn_output", None),
        "post_attention_layernorm.weight" => ("ffn_norm", None),
        "mlp.gate_proj.weight" => ("ffn_gate", None),
        "mlp.up_proj.weight" => ("ffn_up", None),
        "mlp.down_proj.weight" => ("ffn_down", None),
        _ => return None,
    };
    Some((format!("blk.{layer}.{g}.weight"), kind))
}

/// llama.cpp stores Q/K projection rows permuted for interleaved rope: within each head, output
/// row `2j + s` of the GGUF is row `s * (d/2) + j` of the Hugging Face weight. This undoes it.
pub fn unpermute_rope_rows(w: &Tensor, n_heads: usize) -> Result<Tensor> {
    let (out, inp) = w.dims2()?;
    let hd = out / n_heads;
    Ok(w.reshape((n_heads, hd / 2, 2, inp))?
        .transpose(1, 2)?
        .contiguous()?
        .reshape((out, inp))?)
}

/// The inverse of [`unpermute_rope_rows`] (Hugging Face order to llama.cpp order).
pub fn permute_rope_rows(w: &Tensor, n_heads: usize) -> Result<Tensor> {
    let (out, inp) = w.dims2()?;
    let hd = out / n_heads;
    Ok(w.reshape((n_heads, 2, hd / 2, inp))?
        .transpose(1, 2)?
        .contiguous()?
        .reshape((out, inp))?)
}

/// Open a GGUF and load the model and its tokenizer.
pub fn load(path: &Path, dtype: DType, device: &Device) -> Result<(Llama, Tokenizer)> {
    let mut f = GgufFile::open(path)?;
    let tok = f.tokenizer()?;
    let vocab_rows = f.llama_config()?.vocab_size;
    if tok.vocab_size() > vocab_rows {
        return Err(PolicyError::Tokenizer(format!(
            "tokenizer mismatch in {}: the tokenizer has {} tokens but the model's embedding has {vocab_rows} rows",
            path.display(),
            tok.vocab_size(),
        )));
    }
    let model = f.load_llama(dtype, device)?;
    Ok((model, tok))
}
