//! Profile files: `Profile::parse` must refuse what it cannot take with an error, never
//! panic, and a profile it takes must apply to the engine's options.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rsandbox::profile::Profile;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    if let Ok(profile) = Profile::parse("fuzz.toml", text) {
        let _ = profile.apply_limits(rsandbox::EvalOptions::default());
        // No libraries: nothing is read; an asked package is then "not installed".
        let _ = profile.allowed_packages(&[]);
    }
});
