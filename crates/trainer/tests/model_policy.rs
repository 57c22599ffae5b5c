//! The embedded SmolLM2 as a policy, end to end through the collector: a couple of short
//! episodes with few tokens (seconds on a CPU).

mod common;

use candle_core::{DType, Device};
use rlvmr_core::PromptConfig;
use trainer::policies::{ModelPolicy, ModelPolicyOptions};
use trainer::{collect, grouped_specs, CollectorOptions};

#[test]
fn smollm2_plays_two_short_episodes() {
    let (model, tokenizer) =
        policy::load_model(policy::assets::DEFAULT_MODEL_NAME, DType::F32, &Device::Cpu).unwrap();
    let check = tokenizer.clone();
    let options = ModelPolicyOptions {
        max_new_tokens: 12,
        temperature: 1.0,
        seed: 5,
        ..ModelPolicyOptions::default()
    };
    let mut policy = ModelPolicy::new("smollm2", model, tokenizer, options).unwrap();
    let provider = common::alfworld("L2");
    let specs = grouped_specs(&provider.test_tasks()[..1], 2, 0);
    let collector = CollectorOptions {
        max_steps: 2,
        prompt: PromptConfig::small(),
        ..CollectorOptions::default()
    };
    let run = collect(provider.as_ref(), &mut policy, &specs, &collector).unwrap();
    assert_eq!(run.episodes.len(), 2);
    for e in &run.episodes {
        assert!(e.error.is_none(), "{:?}", e.error);
        assert_eq!(e.steps.len(), 2);
        for s in &e.steps {
            assert!(
                !s.prompt_ids.is_empty()
                    && !s.response_ids.is_empty()
                    && s.response_ids.len() <= 12
            );
            assert_eq!(s.logprobs.len(), s.response_ids.len());
            assert!(s.logprobs.iter().all(|lp| lp.is_finite() && *lp <= 0.0));
            assert_eq!(
                s.output,
                check.decode(&s.response_ids, true).unwrap(),
                "the output is exactly the sampled tokens"
            );
            assert!(
                check
                    .decode(&s.prompt_ids, false)
                    .unwrap()
                    .contains(&s.prompt),
                "the prompt ids hold the rendered prompt"
            );
        }
    }
    assert_eq!(
        run.throughput.generated_tokens,
        run.episodes
            .iter()
            .map(|e| e.generated_tokens())
            .sum::<usize>()
    );
    assert!(run.throughput.tokens_per_s > 0.0 && run.throughput.policy_s > 0.0);
}
