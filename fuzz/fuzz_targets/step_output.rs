//! The step-output parser on arbitrary bytes: never panics.
#![no_main]
use libfuzzer_sys::fuzz_target;
use rlvmr_core::format::{parse_output, OutputStyle, Validity};

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    for style in [OutputStyle::Tagged, OutputStyle::Think] {
        for validity in [Validity::Strict, Validity::Lenient] {
            let _ = parse_output(&text, style, validity);
        }
    }
});
