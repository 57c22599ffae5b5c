//! Training primitives: AdamW (PyTorch semantics), global-norm gradient clipping, gradient
//! accumulation, the SFT and PPO-clip losses and a one-call training step.
//!
//! Gradients are candle [`GradStore`]s (what `loss.backward()` returns), keyed by the
//! parameters' tensor ids. The optimizer holds the named parameters ([`Llama::named_vars`]).

use crate::error::{PolicyError, Result};
use crate::logprobs::{response_scores, ResponseBatch, TokenScores};
use crate::model::Llama;
use crate::ops::gpu;
use crate::ops::raw::{with_slice, with_slice_mut, RawFloat};
use rayon::prelude::*;
use candle_core::{backprop::GradStore, DType, Tensor, Var};

/// AdamW hyper-parameters. Defaults are `torch.optim.AdamW`'s.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct AdamWConfig {
    pub lr: f64,
    pub beta1: f64,
    pub beta2: f64,
    pub eps: f64,
    /// Decoupled weight decay: `p -= lr * weight_decay * p` before the Adam update.
    pub weight_decay: f64,
}

impl Default for AdamWConfig {
    fn default() -> Self {
        Self {
            lr: 1e-3,
            beta1: 0.9,
            beta2: 0.999,
            eps: 1e-8,
            weight_decay: 1e-2,
        }
    }
}

/// One parameter and its Adam state.
#[derive(Debug)]
pub(crate) struct ParamState {
    pub(crate) name: String,
    pub(crate) var: Var,
    /// First moment (`exp_avg`), `None` until the parameter first gets a gradient.
    pub(crate) m: Option<Tensor>,
    /// Second moment (`exp_avg_sq`).
    pub(crate) v: Option<Tensor>,
    /// Number of updates this parameter received (PyTorch keeps it per parameter).
    pub(crate) step: u64,
}

/// AdamW over a list of named parameters, as `torch.optim.AdamW` (amsgrad off, not
/// maximizing). For each parameter with a gradient `g`, at its step `t` (1-based):
///
/// ```text
/// p <- p - lr * wd * p
/// m <- b1 m + (1 - b1) g
/// v <- b2 v + (1 - b2) g^2
/// p <- p - (lr / (1 - b1^t)) * m / (sqrt(v) / sqrt(1 - b2^t) + eps)
/// ```
///
/// Parameters without a gradient in the store are skipped entirely (no decay, no state change),
/// as in PyTorch.
#[derive(Debug)]
pub struct AdamW {
    cfg: AdamWConfig,
    pub(crate) params: Vec<ParamState>,
    pub(crate) steps: u64,
}

impl AdamW {
    pub fn new(vars: Vec<(String, Var)>, cfg: AdamWConfig) -> Result<Self> {
        let mut seen = std::collections::HashSet::new();
        for (name, _) in &vars {
            if !seen.insert(name.clone()) {
                return Err(PolicyError::Input(format!(
                    "AdamW: parameter name {name} given twice"
                )));
            }
        }
        Ok(Self {
            cfg,
            params: vars
                .into_iter()
                .map(|(name, var)| ParamState {
                    name,
                    var,
                    m: None,
                    v: None,
                    step: 0,
                })
                .collect(),
            steps: 0,
        })
    }

    /// An optimizer over the trainable parameters of `model` ([`Llama::trainable_vars`]: every
    /// weight, or only the LoRA matrices when an adapter is attached).
    pub fn for_model(model: &Llama, cfg: AdamWConfig) -> Result<Self> {
        Self::new(model.trainable_vars(), cfg)
    }

    pub fn config(&self) -> &AdamWConfig {
        &self.cfg
    }
    pub fn config_mut(&mut self) -> &mut AdamWConfig {
        &mut self.cfg
    }
    pub fn set_lr(&mut self, lr: f64) {
        self.cfg.lr = lr;
    }
    /// Number of calls to [`AdamW::step`] so far.
    pub fn step_count(&self) -> u64 {
        self.steps
    }
    /// The parameters, in order.
    pub fn vars(&self) -> Vec<(String, Var)> {
        self.params
            .iter()
            .map(|p| (p.name.clone(), p.var.clone()))
            .collect()
    }

    /// The Adam moments of parameter `name` (`exp_avg`, `exp_avg_sq`) and its step, if it has
    /// been updated at least once.
    pub fn moments(&self, name: &str) -> Option<(Tensor, Tensor, u64)> {
        let p = self.params.iter().find(|p| p.name == name)?;
        // Copies: the optimizer updates its moments in place.
        let m = p.m.as_ref()?.copy().ok()?;
        let v = p.v.as_ref()?.copy().ok()?;
        Some((m, v, p.step))
    }

    /// Apply one update with the gradients in `grads`.
    ///
    /// f32 and f64 parameters in main memory are updated by one fused pass over the raw
    /// buffers (parameter, moments and gradient, in place), f32 parameters on a GPU by one
    /// kernel doing the same ([`crate::ops::gpu::adamw_in_place`]), other dtypes by tensor ops.
    pub fn step(&mut self, grads: &GradStore) -> Result<()> {
        for p in self.params.iter_mut() {
            let Some(g) = grads.get(p.var.as_tensor()) else {
                continue;
            };
            let dtype = p.var.dtype();
            let mut g = g.detach().to_dtype(dtype)?;
            if g.dims() != p.var.dims() {
                return Err(PolicyError::Input(format!(
                    "gradient of {} has shape {:?}, parameter {:?}",
                    p.name,
                    g.dims(),
                    p.var.dims()
                )));
            }
            if !g.is_contiguous() {
                g = g.contiguous()?;
            }
            p.step += 1;
            let scalars = AdamWScalars::new(&self.cfg, p.step);
            let in_main_memory = p.var.device().is_cpu();
            match dtype {
                DType::F32 if in_main_memory => fused_update::<f32>(p, &g, &scalars)?,
                DType::F64 if in_main_memory => fused_update::<f64>(p, &g, &scalars)?,
                DType::F32 if gpu::serves(&g) && p.var.is_contiguous() => gpu_update(p, &g, &scalars)?,
                _ => tensor_update(p, &g, &scalars)?,
            }
        }
        self.steps += 1;
        Ok(())
    }

    /// Global L2 norm of this optimizer's gradients in `grads`.
    pub fn grad_norm(&self, grads: &GradStore) -> Result<f64> {
        let vars: Vec<Var> = self.params.iter().map(|p| p.var.clone()).collect();
        grad_norm(&vars, grads)
    }

    /// [`clip_grad_norm`] over this optimizer's parameters.
    pub fn clip_grad_norm(&self, grads: &mut GradStore, max_norm: f64) -> Result<f64> {
        let vars: Vec<Var> = self.params.iter().map(|p| p.var.clone()).collect();
        clip_grad_norm(&vars, grads, max_norm)
    }
}

/// The per-step constants of one parameter's AdamW update (`t` is its 1-based step).
struct AdamWScalars {
    /// `1 - lr * weight_decay` (1 when there is no decay).
    decay: f64,
    b1: f64,
    b2: f64,
    /// `1 / sqrt(1 - b2^t)`.
    inv_sqrt_bc2: f64,
    eps: f64,
    /// `lr / (1 - b1^t)`.
    step_size: f64,
}

impl AdamWScalars {
    fn new(cfg: &AdamWConfig, step: u64) -> Self {
        let t = step as i32;
        Self {
            decay: 1.0 - cfg.lr * cfg.weight_decay,
            b1: cfg.beta1,
            b2: cfg.beta2,
            inv_sqrt_bc2: 1.0 / (1.0 - cfg.beta2.powi(t)).sqrt(),
            eps: cfg.eps,
            step_size: cfg.lr / (1.0 - cfg.beta1.powi(t)),
        }
    }
}

/// Elements per parallel chunk of the fused loops (large enough to amortise the task cost).
const CHUNK: usize = 1 << 16;

/// The AdamW update in one pass over the raw buffers, in place. Moments start at zero, which
/// gives PyTorch's first step exactly (`0 * b1 + (1 - b1) g`).
fn fused_update<T: RawFloat>(p: &mut ParamState, g: &Tensor, k: &AdamWScalars) -> Result<()> {
    let zeros = || p.var.as_tensor().zeros_like();
    let m = match p.m.take() {
        Some(m) => m.contiguous()?,
        None => zeros()?,
    };
    let v = match p.v.take() {
        Some(v) => v.contiguous()?,
        None => zeros()?,
    };
    let c = |x: f64| T::from_f64(x);
    let (decay, b1, b2, one_b1, one_b2) = (c(k.decay), c(k.b1), c(k.b2), c(1.0 - k.b1), c(1.0 - k.b2));
    let (inv_sqrt_bc2, eps, step_size) = (c(k.inv_sqrt_bc2), c(k.eps), c(k.step_size));
    let name = p.name.as_str();
    with_slice_mut::<T, _>(p.var.as_tensor(), name, |w| {
        with_slice_mut::<T, _>(&m, name, |m| {
            with_slice_mut::<T, _>(&v, name, |v| {
                with_slice::<T, _>(g, name, |g| {
                    w.par_chunks_mut(CHUNK)
                        .zip(m.par_chunks_mut(CHUNK))
                        .zip(v.par_chunks_mut(CHUNK))
                        .zip(g.par_chunks(CHUNK))
                        .for_each(|(((w, m), v), g)| {
                            for i in 0..w.len() {
                                let gi = g[i];
                                let mi = m[i] * b1 + gi * one_b1;
                                let vi = v[i] * b2 + gi * gi * one_b2;
                                let denom = vi.sqrt() * inv_sqrt_bc2 + eps;
                                w[i] = w[i] * decay - mi / denom * step_size;
                                m[i] = mi;
                                v[i] = vi;
                            }
                        });
                    Ok(())
                })
            })
        })
    })?;
    p.m = Some(m);
    p.v = Some(v);
    Ok(())
}

/// The same update by one GPU kernel, in place (moments made on the first step).
fn gpu_update(p: &mut ParamState, g: &Tensor, k: &AdamWScalars) -> Result<()> {
    let zeros = || p.var.as_tensor().zeros_like();
    let m = match p.m.take() {
        Some(m) => m,
        None => zeros()?,
    };
    let v = match p.v.take() {
        Some(v) => v,
        None => zeros()?,
    };
    let f = |x: f64| x as f32;
    let scalars = [f(k.decay), f(k.b1), f(k.b2), f(1.0 - k.b1), f(1.0 - k.b2), f(k.inv_sqrt_bc2), f(k.eps), f(k.step_size)];
    gpu::adamw_in_place(p.var.as_tensor(), &m, &v, g, scalars)?;
    p.m = Some(m);
    p.v = Some(v);
    Ok(())
}

/// The same update with tensor ops, for dtypes and devices the fused loop does not cover.
fn tensor_update(p: &mut ParamState, g: &Tensor, k: &AdamWScalars) -> Result<()> {
    let w = (p.var.as_tensor().detach() * k.decay)?;
    let m = match &p.m {
        Some(m) => ((m * k.b1)? + (g * (1.0 - k.b1))?)?,
        None => (g * (1.0 - k.b1))?,
    };
    let g2 = g.sqr()?;
    let v = match &p.v {
        Some(v) => ((v * k.b2)? + (g2 * (1.0 - k.b2))?)?,
        None => (g2 * (1.0 - k.b2))?,
    };
    let denom = ((v.sqrt()? * k.inv_sqrt_bc2)? + k.eps)?;
    let update = ((&m / denom)? * k.step_size)?;
    p.var.set(&(w - update)?)?;
    p.m = Some(m);
    p.v = Some(v);
    Ok(())
}

/// Sum of squares of a gradient, accumulated in f64.
fn sum_of_squares(g: &Tensor) -> Result<f64> {
    let g = if g.is_contiguous() { g.clone() } else { g.contiguous()? };
    fn run<T: RawFloat>(g: &Tensor) -> Result<f64> {
        with_slice::<T, _>(g, "gradient", |s| {
            // Chunk sums collected in order and added in order: a parallel `sum` adds in
            // whatever order rayon split the work, so the norm (and the clipping) would vary.
            let chunk_sums: Vec<f64> = s
                .par_chunks(CHUNK)
                .map(|c| c.iter().map(|x| x.to_f64() * x.to_f64()).sum::<f64>())
                .collect();
            Ok(chunk_sums.iter().sum())
        })
    }
    let in_main_memory = g.device().is_cpu();
    match g.dtype() {
        DType::F32 if in_main_memory => run::<f32>(&g),
        DType::F64 if in_main_memory => run::<f64>(&g),
        DType::F32 if gpu::serves(&g) => gpu::sum_of_squares(&g),
        _ => tensor_sum_of_squares(&g),
    }
}

/// [`sum_of_squares`] by tensor ops, for other dtypes.
fn tensor_sum_of_squares(g: &Tensor) -> Result<f64> {
    Ok(g.to_dtype(DType::F64)?.sqr()?.sum_all()?.to_scalar::<f64>()?)
}

/// Global L2 norm over the gradients of `vars` present in `grads` (computed in f64).
pub fn grad_norm(vars: &[Var], grads: &GradStore) -> Result<f64> {
    let mut total = 0f64;
    for var in vars {
        if let Some(g) = grads.get(var.as_tensor()) {
            total += sum_of_squares(g)?;
        }
    }
    Ok(total.sqrt())
}

/// Scale the gradients of `vars` in place so that their global L2 norm is at most `max_norm`,
/// as `torch.nn.utils.clip_grad_norm_`: coefficient `max_norm / (norm + 1e-6)`, applied only
/// when below 1. Returns the norm before clipping.
pub fn clip_grad_norm(vars: &[Var], grads: &mut GradStore, max_norm: f64) -> Result<f64> {
    let norm = grad_norm(vars, grads)?;
    if !norm.is_finite() {
        return Err(PolicyError::Input(format!(
            "gradient norm is not finite ({norm})"
        )));
    }
    let coef = max_norm / (norm + 1e-6);
    if coef < 1.0 {
        for var in vars {
            if let Some(g) = grads.remove(var.as_tensor()) {
                grads.insert(var.as_tensor(), (g * coef)?);
            }
        }
    }
    Ok(norm)
}

/// Sums gradients over micro-batches. Only the gradients of its parameters are kept (so the
/// rest of each store is freed). Scale each micro-batch's loss (e.g. by its share of the
/// tokens) so that the sum is the full batch's gradient.
#[derive(Debug)]
pub struct Accumulator {
    vars: Vec<Var>,
    sum: GradStore,
    micro_batches: usize,
}

impl Accumulator {
    pub fn new(vars: &[(String, Var)]) -> Self {
        Self {
            vars: vars.iter().map(|(_, v)| v.clone()).collect(),
            sum: GradStore::default(),
            micro_batches: 0,
        }
    }

    /// Add one micro-batch's gradients. On a GPU, f32 sums are added to in place: the first
    /// micro-batch's gradient is copied there (a gradient may share its buffer with another
    /// tensor of the graph), and the later ones added by one kernel each.
    pub fn add(&mut self, mut grads: GradStore) -> Result<()> {
        for var in &self.vars {
            if let Some(g) = grads.remove(var.as_tensor()) {
                let g = g.detach();
                let on_gpu = gpu::serves(&g) && g.is_contiguous();
                let sum = match self.sum.remove(var.as_tensor()) {
                    Some(s) if on_gpu && s.is_contiguous() => {
                        gpu::add_assign(&s, &g)?;
                        s
                    }
                    Some(s) => (s + g)?,
                    None if on_gpu => g.copy()?,
                    None => g,
                };
                self.sum.insert(var.as_tensor(), sum);
            }
        }
        self.micro_batches += 1;
        Ok(())
    }

    pub fn micro_batches(&self) -> usize {
        self.micro_batches
    }

    /// The summed gradients (clip them, then pass to [`AdamW::step`]); resets the accumulator.
    pub fn take(&mut self) -> GradStore {
        self.micro_batches = 0;
        std::mem::take(&mut self.sum)
    }
}

/// `sum(x * mask) / sum(mask)` over all elements (a token-level mean over the batch).
pub fn masked_mean(x: &Tensor, mask: &Tensor) -> Result<Tensor> {
    let mask = mask.to_dtype(x.dtype())?;
    let n = mask.sum_all()?.to_dtype(DType::F64)?.to_scalar::<f64>()?;
    if n <= 0.0 {
        return Err(PolicyError::Input("masked mean over an empty mask".into()));
    }
    Ok(((x * &mask)?.sum_all()? / n)?)
}

/// SFT loss: mean negative log-prob over the masked tokens, `-sum(logp * mask) / sum(mask)`.
/// `mask` may hold per-token weights (the denominator is then their sum).
pub fn sft_loss(logp: &Tensor, mask: &Tensor) -> Result<Tensor> {
    masked_mean(&logp.neg()?, mask)
}

/// PPO clipped-surrogate loss (to minimize), token-level mean over the mask:
/// `-mean(min(r * A, clip(r, 1 - eps, 1 + eps) * A))` with `r = exp(logp - old_logp)`:
/// [`crate::ppo::ppo_loss`] without dual clip, KL or entropy terms.
pub fn ppo_clip_loss(
    logp: &Tensor,
    old_logp: &Tensor,
    advantages: &Tensor,
    mask: &Tensor,
    eps: f64,
) -> Result<Tensor> {
    let mask = mask.to_dtype(logp.dtype())?;
    let tokens = mask.sum_all()?.to_dtype(DType::F64)?.to_scalar::<f64>()?;
    if tokens <= 0.0 {
        return Err(PolicyError::Input("masked mean over an empty mask".into()));
    }
    let cfg = crate::ppo::PpoLossConfig {
        clip_low: eps,
        clip_high: eps,
        clip_ratio_c: None,
        kl_coef: 0.0,
        kl_clamp: 0.0,
        entropy_coef: 0.0,
    };
    let inputs = crate::ppo::PpoInputs {
        logp,
        entropy: logp,
        old_logp,
        ref_logp: None,
        advantages,
        mask: &mask,
    };
    Ok(crate::ppo::ppo_loss(&inputs, &cfg, tokens)?.loss)
}

/// The objective of a [`train_step`].
#[derive(Debug, Clone)]
pub enum Objective {
    /// Mean negative log-prob of the response tokens.
    Sft,
    /// PPO clip with the sampling policy's log-probs and per-token advantages, both
    /// `[batch, seq - 1]` aligned with the batch's response mask.
    PpoClip {
        old_logp: Tensor,
        advantages: Tensor,
        clip_eps: f64,
    },
}

impl Objective {
    /// The loss for `scores` of a batch with response mask `mask`.
    pub fn loss(&self, scores: &TokenScores, mask: &Tensor) -> Result<Tensor> {
        match self {
            Objective::Sft => sft_loss(&scores.logprobs, mask),
            Objective::PpoClip {
                old_logp,
                advantages,
                clip_eps,
            } => ppo_clip_loss(&scores.logprobs, old_logp, advantages, mask, *clip_eps),
        }
    }
}

/// What a [`train_step`] did.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StepStats {
    pub loss: f64,
    /// Global gradient norm before clipping.
    pub grad_norm: f64,
}

/// Forward, loss, backward, clip (if `max_grad_norm` is given) and one AdamW step.
pub fn train_step(
    model: &Llama,
    opt: &mut AdamW,
    batch: &ResponseBatch,
    objective: &Objective,
    max_grad_norm: Option<f64>,
) -> Result<StepStats> {
    let scores = response_scores(model, batch)?;
    let loss = objective.loss(&scores, &batch.response_mask)?;
    let loss_value = loss.to_dtype(DType::F64)?.to_scalar::<f64>()?;
    let mut grads = loss.backward()?;
    drop(scores);
    drop(loss);
    let grad_norm = match max_grad_norm {
        Some(max) => opt.clip_grad_norm(&mut grads, max)?,
        None => opt.grad_norm(&grads)?,
    };
    opt.step(&grads)?;
    Ok(StepStats {
        loss: loss_value,
        grad_norm,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::Device;

    fn param(name: &str, values: &[f32]) -> ParamState {
        let var = Var::from_slice(values, values.len(), &Device::Cpu).unwrap();
        ParamState { name: name.into(), var, m: None, v: None, step: 0 }
    }

    /// The tensor-op path is what a GPU runs: it must give the fused loop's update.
    #[test]
    fn tensor_ops_update_as_the_fused_loop() {
        let init = [0.5f32, -1.25, 2.0, 0.0, 3.5, -0.75];
        let cfg = AdamWConfig { lr: 1e-2, weight_decay: 0.1, ..AdamWConfig::default() };
        let (mut fused, mut plain) = (param("w", &init), param("w", &init));
        for t in 1..=3u64 {
            let g: Vec<f32> = init.iter().map(|x| x * t as f32 - 0.3).collect();
            let g = Tensor::new(g.as_slice(), &Device::Cpu).unwrap();
            let k = AdamWScalars::new(&cfg, t);
            fused_update::<f32>(&mut fused, &g, &k).unwrap();
            tensor_update(&mut plain, &g, &k).unwrap();
        }
        let a = fused.var.as_tensor().to_vec1::<f32>().unwrap();
        let b = plain.var.as_tensor().to_vec1::<f32>().unwrap();
        for (x, y) in a.iter().zip(&b) {
            assert!((x - y).abs() <= 1e-6 * x.abs().max(1.0), "fused {a:?} against tensor ops {b:?}");
        }
        assert_ne!(a, init.to_vec(), "the parameters moved");
    }

    const STEPS: usize = 3;
    const MAX_NORM: f64 = 300.0;

    /// The gradient of micro-batch `micro` of step `t` at element `i`.
    fn micro_grad(t: usize, micro: usize, i: usize) -> f32 {
        ((i * 7 + t * 2 + micro) % 31) as f32 / 13.0 - 1.1
    }

    /// One run of [`the_test_device_updates_as_the_cpu`] on `device`: three AdamW steps, each
    /// over two accumulated micro-batches with the norm clipped; the parameter and the norms.
    fn accumulate_clip_step(device: &Device, init: &[f32], cfg: &AdamWConfig) -> (Vec<f32>, Vec<f64>) {
        let n = init.len();
        let var = Var::from_slice(init, n, device).unwrap();
        let mut opt = AdamW::new(vec![("w".into(), var.clone())], cfg.clone()).unwrap();
        let mut acc = Accumulator::new(&opt.vars());
        let mut norms = Vec::new();
        for t in 1..=STEPS {
            for micro in 0..2 {
                let g: Vec<f32> = (0..n).map(|i| micro_grad(t, micro, i)).collect();
                let mut grads = GradStore::default();
                grads.insert(var.as_tensor(), Tensor::from_vec(g, n, device).unwrap());
                acc.add(grads).unwrap();
            }
            let mut sum = acc.take();
            norms.push(opt.clip_grad_norm(&mut sum, MAX_NORM).unwrap());
            opt.step(&sum).unwrap();
        }
        (var.as_tensor().to_vec1::<f32>().unwrap(), norms)
    }

    /// The same three steps written out in f64, element by element (PyTorch's formulas).
    fn reference_steps(init: &[f32], cfg: &AdamWConfig) -> (Vec<f64>, Vec<f64>) {
        let mut w: Vec<f64> = init.iter().map(|&x| x as f64).collect();
        let (mut m, mut v) = (vec![0f64; w.len()], vec![0f64; w.len()]);
        let mut norms = Vec::new();
        for t in 1..=STEPS {
            // The micro-batches' sum in f32, as the accumulator keeps it.
            let g: Vec<f64> = (0..w.len()).map(|i| (micro_grad(t, 0, i) + micro_grad(t, 1, i)) as f64).collect();
            let norm = g.iter().map(|x| x * x).sum::<f64>().sqrt();
            let coef = (MAX_NORM / (norm + 1e-6)).min(1.0);
            norms.push(norm);
            let (bc1, bc2) = (1.0 - cfg.beta1.powi(t as i32), 1.0 - cfg.beta2.powi(t as i32));
            for i in 0..w.len() {
                let gi = g[i] * coef;
                m[i] = cfg.beta1 * m[i] + (1.0 - cfg.beta1) * gi;
                v[i] = cfg.beta2 * v[i] + (1.0 - cfg.beta2) * gi * gi;
                w[i] = w[i] * (1.0 - cfg.lr * cfg.weight_decay) - cfg.lr / bc1 * m[i] / ((v[i] / bc2).sqrt() + cfg.eps);
            }
        }
        (w, norms)
    }

    /// AdamW, the accumulator and the gradient norm on the test device (`$RLVMR_DEVICE`; on a
    /// GPU, the kernels of `crate::ops::gpu`) and on the CPU give the f64 reference's numbers,
    /// and each other's.
    #[test]
    fn the_test_device_updates_as_the_cpu() {
        let device = crate::device::from_env().unwrap();
        let cfg = AdamWConfig { lr: 1e-2, weight_decay: 0.1, ..AdamWConfig::default() };
        // More elements than one grid-stride pass of the GPU kernels covers (1024 x 256).
        let init: Vec<f32> = (0..300_001).map(|i| ((i % 97) as f32 - 48.0) / 17.0).collect();
        let (want, want_norms) = reference_steps(&init, &cfg);
        assert!(want_norms[0] > MAX_NORM, "the clip is exercised: {want_norms:?}");
        for dev in [Device::Cpu, device] {
            let (got, norms) = accumulate_clip_step(&dev, &init, &cfg);
            for (a, b) in want_norms.iter().zip(&norms) {
                assert!((a - b).abs() <= 1e-9 * a, "norms on {dev:?}: {norms:?}, reference {want_norms:?}");
            }
            let worst = want.iter().zip(&got).map(|(a, &b)| (a - b as f64).abs() / a.abs().max(1.0)).fold(0f64, f64::max);
            assert!(worst <= 1e-5, "parameters on {dev:?} differ from the reference by up to {worst} (relative)");
        }
    }

    #[test]
    fn tensor_ops_sum_of_squares_as_the_raw_loop() {
        let g = Tensor::new(&[3f32, -4.0, 0.5, 12.0], &Device::Cpu).unwrap();
        assert_eq!(sum_of_squares(&g).unwrap(), 169.25);
        assert_eq!(tensor_sum_of_squares(&g).unwrap(), 169.25);
    }
}
