//! The reinforcement-learning objective of GRPO-MR and its baselines, per token, as verl's
//! actor computes it (`compute_policy_loss`, `kl_penalty("low_var_kl")`, the entropy bonus):
//!
//! ```text
//! ratio = exp(clamp(logp - old, -20, 20))
//! pg1   = -A * ratio
//! pg2   = -A * clamp(ratio, 1 - clip_low, 1 + clip_high)
//! pg    = max(pg1, pg2)                                 (the PPO clip)
//! pg    = min(pg, -A * c)     where A < 0               (dual clip, when `clip_ratio_c` is set)
//! kl    = clamp(exp(ref - logp) - (ref - logp) - 1, -kl_clamp, kl_clamp)   (k3)
//! loss  = sum over masked tokens of (pg + kl_coef * kl - entropy_coef * entropy) / denom
//! ```
//!
//! `denom` is the number of response tokens of the whole mini-batch, so micro-batches whose
//! losses are backpropagated one after the other add up to the mini-batch's token mean.
//! Clamps pass no gradient outside their range, as `torch.clamp`; the minimum or maximum
//! passes the gradient of the side it picked. `old`, `ref` and `A` are constants.

use candle_core::{DType, Tensor};
use serde::{Deserialize, Serialize};

use crate::error::{PolicyError, Result};

/// verl's bound on `logp - old` before the exponential (keeps the ratio finite).
const LOG_RATIO_BOUND: f64 = 20.0;

/// The weights and bounds of the objective.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct PpoLossConfig {
    /// The ratio is clipped at `1 - clip_low` below ...
    pub clip_low: f64,
    /// ... and at `1 + clip_high` above.
    pub clip_high: f64,
    /// Dual clip: for negative advantages the loss is at most `-A * c` (`c > 1`); `None`: off.
    pub clip_ratio_c: Option<f64>,
    /// Weight of the k3 KL to the reference model (0: no reference needed).
    pub kl_coef: f64,
    /// The k3 estimate is clamped to `[-kl_clamp, kl_clamp]`.
    pub kl_clamp: f64,
    /// Weight of the entropy bonus (subtracted from the loss).
    pub entropy_coef: f64,
}

impl Default for PpoLossConfig {
    /// The published runs (spec §4) with verl's dual-clip constant.
    fn default() -> Self {
        PpoLossConfig {
            clip_low: 0.2,
            clip_high: 0.2,
            clip_ratio_c: Some(3.0),
            kl_coef: 0.01,
            kl_clamp: 10.0,
            entropy_coef: 0.001,
        }
    }
}

/// Per-token inputs, every tensor `[rows, tokens]` and aligned with `mask`.
pub struct PpoInputs<'a> {
    /// Log-probs under the model being trained (differentiable).
    pub logp: &'a Tensor,
    /// Entropy of the model's predictive distribution (differentiable).
    pub entropy: &'a Tensor,
    /// Log-probs under the weights the rollouts were scored with (constant).
    pub old_logp: &'a Tensor,
    /// Log-probs under the frozen reference model; needed when `kl_coef > 0`.
    pub ref_logp: Option<&'a Tensor>,
    /// The advantage of each token (constant).
    pub advantages: &'a Tensor,
    /// 1 on the tokens that count, 0 on prompt and padding.
    pub mask: &'a Tensor,
}

/// Sums over the masked tokens, for the logs (divide by `tokens` for means).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct PpoStats {
    pub tokens: f64,
    pub pg_loss: f64,
    pub kl: f64,
    pub entropy: f64,
    /// Tokens whose clipped term was the larger loss (verl's `pg_clipfrac`).
    pub clipped: f64,
    /// Sum of `|ratio - 1|`.
    pub ratio_dev: f64,
}

impl PpoStats {
    pub fn add(&mut self, other: &PpoStats) {
        self.tokens += other.tokens;
        self.pg_loss += other.pg_loss;
        self.kl += other.kl;
        self.entropy += other.entropy;
        self.clipped += other.clipped;
        self.ratio_dev += other.ratio_dev;
    }

    /// `sum / tokens`, 0 when no token was seen.
    pub fn mean(&self, sum: f64) -> f64 {
        if self.tokens > 0.0 {
            sum / self.tokens
        } else {
            0.0
        }
    }
}

/// The loss to backpropagate and its parts.
pub struct PpoLoss {
    pub loss: Tensor,
    pub stats: PpoStats,
}

/// `x` clamped to `[low, high]` with no gradient where it was clamped (`torch.clamp`).
fn clamp_keep_grad_inside(x: &Tensor, low: f64, high: f64) -> Result<Tensor> {
    let fixed = x.detach().clamp(low, high)?;
    let inside = x.ge(low)?.mul(&x.le(high)?)?;
    Ok(inside.where_cond(x, &fixed)?)
}

/// Sum of `x * mask` as an f64.
fn masked_sum(x: &Tensor, mask: &Tensor) -> Result<f64> {
    Ok((x.detach() * mask)?
        .sum_all()?
        .to_dtype(DType::F64)?
        .to_scalar::<f64>()?)
}

/// The objective of the module docs over one micro-batch, divided by `denom`.
pub fn ppo_loss(inputs: &PpoInputs, cfg: &PpoLossConfig, denom: f64) -> Result<PpoLoss> {
    if !(denom > 0.0 && denom.is_finite()) {
        return Err(PolicyError::Input(format!(
            "the loss denominator must be a positive token count, got {denom}"
        )));
    }
    let dtype = inputs.logp.dtype();
    let constant = |t: &Tensor| -> Result<Tensor> { Ok(t.detach().to_dtype(dtype)?) };
    let (old, adv, mask) = (
        constant(inputs.old_logp)?,
        constant(inputs.advantages)?,
        constant(inputs.mask)?,
    );
    let logp = inputs.logp;

    let log_ratio = clamp_keep_grad_inside(&(logp - &old)?, -LOG_RATIO_BOUND, LOG_RATIO_BOUND)?;
    let ratio = log_ratio.exp()?;
    let neg_adv = adv.neg()?;
    let pg1 = (&neg_adv * &ratio)?;
    let clipped_ratio = clamp_keep_grad_inside(&ratio, 1.0 - cfg.clip_low, 1.0 + cfg.clip_high)?;
    let pg2 = (&neg_adv * &clipped_ratio)?;
    let clipped = pg2.detach().gt(&pg1.detach())?;
    let mut pg = clipped.where_cond(&pg2, &pg1)?;
    if let Some(c) = cfg.clip_ratio_c {
        let pg3 = (&neg_adv * c)?;
        let capped = pg3.lt(&pg.detach())?.mul(&adv.lt(0.0)?)?;
        pg = capped.where_cond(&pg3, &pg)?;
    }

    let mut per_token = pg.clone();
    let mut kl_sum = 0.0;
    if cfg.kl_coef != 0.0 {
        let reference = inputs.ref_logp.ok_or_else(|| {
            PolicyError::Input("kl_coef is not 0 but no reference log-probs were given".into())
        })?;
        let diff = (constant(reference)? - logp)?;
        let k3 = ((diff.exp()? - &diff)? - 1.0)?;
        let kl = clamp_keep_grad_inside(&k3, -cfg.kl_clamp, cfg.kl_clamp)?;
        kl_sum = masked_sum(&kl, &mask)?;
        per_token = (per_token + (kl * cfg.kl_coef)?)?;
    }
    let entropy = inputs.entropy;
    if cfg.entropy_coef != 0.0 {
        per_token = (per_token - (entropy * cfg.entropy_coef)?)?;
    }
    let loss = ((per_token * &mask)?.sum_all()? / denom)?;

    let stats = PpoStats {
        tokens: masked_sum(&mask.ones_like()?, &mask)?,
        pg_loss: masked_sum(&pg, &mask)?,
        kl: kl_sum,
        entropy: masked_sum(entropy, &mask)?,
        clipped: masked_sum(&clipped.to_dtype(dtype)?, &mask)?,
        ratio_dev: masked_sum(&(ratio.detach() - 1.0)?.abs()?, &mask)?,
    };
    Ok(PpoLoss { loss, stats })
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::{Device, Var};

    fn t(v: &[f64]) -> Tensor {
        Tensor::from_vec(v.to_vec(), (1, v.len()), &Device::Cpu).unwrap()
    }

    fn values(x: &Tensor) -> Vec<f64> {
        x.flatten_all().unwrap().to_vec1::<f64>().unwrap()
    }

    fn off() -> PpoLossConfig {
        PpoLossConfig {
            clip_ratio_c: None,
            kl_coef: 0.0,
            entropy_coef: 0.0,
            ..PpoLossConfig::default()
        }
    }

    /// Loss and d loss / d logp for one token per case.
    fn run(
        logp: &[f64],
        old: &[f64],
        adv: &[f64],
        reference: Option<&[f64]>,
        entropy: &[f64],
        mask: &[f64],
        cfg: &PpoLossConfig,
        denom: f64,
    ) -> (f64, Vec<f64>, PpoStats) {
        let lp = Var::from_tensor(&t(logp)).unwrap();
        let ent = Var::from_tensor(&t(entropy)).unwrap();
        let (old, adv, mask) = (t(old), t(adv), t(mask));
        let reference = reference.map(t);
        let out = ppo_loss(
            &PpoInputs {
                logp: lp.as_tensor(),
                entropy: ent.as_tensor(),
                old_logp: &old,
                ref_logp: reference.as_ref(),
                advantages: &adv,
                mask: &mask,
            },
            cfg,
            denom,
        )
        .unwrap();
        let grads = out.loss.backward().unwrap();
        let g = grads
            .get(lp.as_tensor())
            .map(values)
            .unwrap_or_else(|| vec![0.0; logp.len()]);
        (out.loss.to_scalar::<f64>().unwrap(), g, out.stats)
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9 * (1.0 + b.abs())
    }

    #[test]
    fn clip_both_sides_hand_values() {
        let ln = f64::ln;
        // ratios 1.5, 0.5, 1.1, 0.9, 1.5, 0.5; advantages +, +, +, -, -, -.
        let logp = [ln(1.5), ln(0.5), ln(1.1), ln(0.9), ln(1.5), ln(0.5)];
        let old = [0.0; 6];
        let adv = [2.0, 2.0, 2.0, -1.0, -1.0, -1.0];
        let mask = [1.0; 6];
        let (loss, grad, stats) = run(&logp, &old, &adv, None, &[0.0; 6], &mask, &off(), 6.0);
        // Per token: A>0, r=1.5 -> clipped at 1.2: -2.4 (no grad); A>0, r=0.5 -> -1.0
        // (unclipped is the max: grad -A r = -1.0); A>0, r=1.1 -> -2.2 (grad -2.2);
        // A<0, r=0.9 -> 0.9 (grad +0.9); A<0, r=1.5 -> 1.5 (grad 1.5); A<0, r=0.5 -> clipped
        // at 0.8: 0.8 (no grad).
        let per_token = [-2.4, -1.0, -2.2, 0.9, 1.5, 0.8];
        assert!(close(loss, per_token.iter().sum::<f64>() / 6.0), "{loss}");
        let expected = [0.0, -1.0, -2.2, 0.9, 1.5, 0.0].map(|g| g / 6.0);
        for (g, e) in grad.iter().zip(expected) {
            assert!(close(*g, e), "{grad:?} vs {expected:?}");
        }
        assert_eq!(stats.clipped, 2.0);
        assert_eq!(stats.tokens, 6.0);
    }

    #[test]
    fn dual_clip_caps_negative_advantages() {
        // ratio 5 with A = -1: the clip gives max(5, 1.2) = 5; dual clip caps it at 3, no grad.
        let cfg = PpoLossConfig {
            clip_ratio_c: Some(3.0),
            ..off()
        };
        let (loss, grad, _) = run(&[5f64.ln()], &[0.0], &[-1.0], None, &[0.0], &[1.0], &cfg, 1.0);
        assert!(close(loss, 3.0), "{loss}");
        assert_eq!(grad, vec![0.0]);
        // Positive advantages are not capped.
        let (loss, _, _) = run(&[5f64.ln()], &[0.0], &[1.0], None, &[0.0], &[1.0], &cfg, 1.0);
        assert!(close(loss, -1.2), "{loss}");
        // Without the dual clip the ratio 5 token costs 5.
        let (loss, grad, _) = run(&[5f64.ln()], &[0.0], &[-1.0], None, &[0.0], &[1.0], &off(), 1.0);
        assert!(close(loss, 5.0) && close(grad[0], 5.0), "{loss} {grad:?}");
    }

    #[test]
    fn k3_kl_and_its_clamp() {
        let cfg = PpoLossConfig { kl_coef: 0.5, ..off() };
        // A = 0 leaves the KL alone. ref - logp = d: k3 = e^d - d - 1, d(k3)/d(logp) = 1 - e^d.
        let d: f64 = 0.7;
        let (loss, grad, stats) =
            run(&[-1.0], &[-1.0], &[0.0], Some(&[-1.0 + d]), &[0.0], &[1.0], &cfg, 1.0);
        let k3 = d.exp() - d - 1.0;
        assert!(close(loss, 0.5 * k3) && close(stats.kl, k3), "{loss}");
        assert!(close(grad[0], 0.5 * (1.0 - d.exp())), "{grad:?}");
        // d = 5: k3 = e^5 - 6 = 142.4 is clamped to 10, with no gradient.
        let (loss, grad, stats) =
            run(&[-6.0], &[-6.0], &[0.0], Some(&[-1.0]), &[0.0], &[1.0], &cfg, 1.0);
        assert!(close(loss, 5.0) && close(stats.kl, 10.0), "{loss}");
        assert_eq!(grad, vec![0.0]);
    }

    #[test]
    fn entropy_bonus_and_token_mean_over_padding() {
        let cfg = PpoLossConfig { entropy_coef: 0.1, ..off() };
        // Two rows of three positions; the last of row 0 and the first of row 1 are padding
        // (huge values there must not leak in). denom = 4 masked tokens.
        let logp = Tensor::from_vec(vec![0.0, 0.0, 1e6, -1e6, 0.0, 0.0], (2, 3), &Device::Cpu).unwrap();
        let lp = Var::from_tensor(&logp).unwrap();
        let entropy = Tensor::from_vec(vec![1.0, 2.0, 1e9, 1e9, 3.0, 4.0], (2, 3), &Device::Cpu).unwrap();
        let zeros = Tensor::zeros((2, 3), DType::F64, &Device::Cpu).unwrap();
        let adv = Tensor::from_vec(vec![1.0, 1.0, 1.0, 5.0, -1.0, -1.0], (2, 3), &Device::Cpu).unwrap();
        let mask = Tensor::from_vec(vec![1.0, 1.0, 0.0, 0.0, 1.0, 1.0], (2, 3), &Device::Cpu).unwrap();
        let out = ppo_loss(
            &PpoInputs {
                logp: lp.as_tensor(),
                entropy: &entropy,
                old_logp: &zeros,
                ref_logp: None,
                advantages: &adv,
                mask: &mask,
            },
            &cfg,
            4.0,
        )
        .unwrap();
        // pg: -1, -1, +1, +1 (ratio 1) -> 0; entropy 1 + 2 + 3 + 4 = 10 -> -0.1 * 10 / 4.
        let loss = out.loss.to_scalar::<f64>().unwrap();
        assert!(close(loss, -0.25), "{loss}");
        assert_eq!(out.stats.tokens, 4.0);
        assert!(close(out.stats.entropy, 10.0));
        let g = values(out.loss.backward().unwrap().get(lp.as_tensor()).unwrap());
        assert_eq!(g, vec![-0.25, -0.25, 0.0, 0.0, 0.25, 0.25]);
    }

    #[test]
    fn equal_weights_give_ratio_one_and_zero_kl() {
        let cfg = PpoLossConfig::default();
        let lp = [-0.3, -2.0, -0.01];
        let (loss, _, stats) = run(&lp, &lp, &[1.0, -2.0, 0.5], Some(&lp), &[0.0; 3], &[1.0; 3], &cfg, 3.0);
        assert_eq!(stats.kl, 0.0);
        assert_eq!(stats.ratio_dev, 0.0);
        assert_eq!(stats.clipped, 0.0);
        assert!(close(loss, -(1.0 - 2.0 + 0.5) / 3.0), "{loss}");
    }

    #[test]
    fn a_missing_reference_or_empty_denominator_is_an_error() {
        let x = t(&[0.0]);
        let inputs = PpoInputs {
            logp: &x,
            entropy: &x,
            old_logp: &x,
            ref_logp: None,
            advantages: &x,
            mask: &x,
        };
        assert!(ppo_loss(&inputs, &PpoLossConfig::default(), 1.0).is_err());
        assert!(ppo_loss(&inputs, &off(), 0.0).is_err());
    }
}
