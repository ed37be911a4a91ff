//! A StartupMessage's parameters: name/value pairs, `options` switches with libpq escapes,
//! ignored parameters.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    sluice_pgsql::fuzzing::startup(data, "extra_float_digits, options");
    sluice_pgsql::fuzzing::startup(data, "");
});
