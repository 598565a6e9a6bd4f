//! The embedded R: start-up, and the two ways the zygote and its children talk to it
//! (evaluate R source, call one of the helpers from `eval.R`).
//!
//! R longjmps on errors, so every evaluation goes through `R_tryEval`; R API calls
//! outside it get only inputs that cannot make R raise (NUL-free UTF-8 strings).

use crate::r_api::*;
use std::ffi::{c_char, CStr, CString};

/// The R helpers (`rsandbox_eval`, `rsandbox_prepare_zygote`, `rsandbox_to_json`).
const EVAL_R: &str = include_str!("eval.R");
/// Tool stubs (`rsandbox_define_tools`).
const TOOLS_R: &str = include_str!("tools.R");

/// R, initialised on this (the main) thread, with the helpers loaded into a private
/// environment whose parent is `baseenv()`, so user code in `globalenv()` cannot shadow them.
pub struct EmbeddedR {
    helpers: SEXP,
}

/// An R-level failure, with R's own message.
#[derive(Debug)]
pub struct RError(pub String);

impl std::fmt::Display for RError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

fn c_string(s: &str) -> Result<CString, RError> {
    CString::new(s).map_err(|_| RError("text contains a NUL byte".into()))
}

impl EmbeddedR {
    /// Start R like `R --vanilla --silent --no-echo`: no profile, site or user files, no
    /// saved workspace, no environ files (the zygote's environment comes from the supervisor).
    pub fn start() -> Result<EmbeddedR, RError> {
        let args = ["R", "--vanilla", "--silent", "--no-echo", "--no-readline"];
        let owned: Vec<CString> = args.iter().map(|a| CString::new(*a).expect("static args")).collect();
        let mut argv: Vec<*mut c_char> = owned.iter().map(|a| a.as_ptr() as *mut c_char).collect();
        // SAFETY: called once, on the main thread, before any other R call. R keeps no
        // reference to argv after initialisation (it copies what it needs). R must not
        // install its own signal handlers: a crash should kill the child so its death
        // reason reaches the supervisor, not start R's interactive "caught segfault" menu.
        unsafe {
            R_SignalHandlers = 0;
            if Rf_initEmbeddedR(argv.len() as i32, argv.as_mut_ptr()) == 0 {
                return Err(RError("R failed to initialise".into()));
            }
            R_Interactive = 0;
        }
        // R set its options while it still counted as interactive; Rscript's is
        // `keep.source = interactive()`, FALSE. (Code may still turn it on: eval.R then
        // keeps the source of what follows, as Rscript does.)
        // SAFETY: R is initialised; the base environment is a valid SEXP.
        eval_source_in("options(keep.source = FALSE)", unsafe { R_BaseEnv })?;
        set_c_stack_limit();
        // SAFETY: R is initialised; the base environment is a valid SEXP.
        let base = unsafe { R_BaseEnv };
        let helpers = eval_source_in("new.env(parent = baseenv())", base)?;
        // SAFETY: keep the environment alive for the life of the process.
        unsafe { R_PreserveObject(helpers) };
        eval_source_in(EVAL_R, helpers)?;
        eval_source_in(TOOLS_R, helpers)?;
        Ok(EmbeddedR { helpers })
    }

    /// Evaluate R source in the helpers' environment; the last value as a string vector.
    pub fn eval_strings(&self, code: &str) -> Result<Vec<String>, RError> {
        let value = eval_source_in(code, self.helpers)?;
        Ok(strings(value))
    }

    /// Call a helper with string arguments; it must return a character vector.
    pub fn call(&self, function: &str, args: &[&str]) -> Result<Vec<String>, RError> {
        let name = c_string(function)?;
        let args: Vec<CString> = args.iter().map(|a| c_string(a)).collect::<Result<_, _>>()?;
        // SAFETY: R is initialised and this is its thread. Each allocated SEXP is protected
        // until the call has been evaluated; mkCharLenCE gets NUL-free UTF-8 (checked above).
        unsafe {
            let mut protected = 0;
            let mut arg_values = Vec::new();
            for arg in &args {
                let bytes = arg.as_bytes();
                let chr = Rf_mkCharLenCE(bytes.as_ptr().cast(), bytes.len() as i32, CE_UTF8);
                arg_values.push(Rf_protect(Rf_ScalarString(chr)));
                protected += 1;
            }
            let f = Rf_install(name.as_ptr());
            let call = match arg_values.as_slice() {
                [] => Rf_lang1(f),
                [a] => Rf_lang2(f, *a),
                [a, b] => Rf_lang3(f, *a, *b),
                [a, b, c] => Rf_lang4(f, *a, *b, *c),
                [a, b, c, d] => Rf_lang5(f, *a, *b, *c, *d),
                _ => {
                    Rf_unprotect(protected);
                    return Err(RError(format!("{function}: at most four arguments expected")));
                }
            };
            Rf_protect(call);
            protected += 1;
            let result = try_eval(call, self.helpers);
            let out = result.map(strings);
            Rf_unprotect(protected);
            out
        }
    }
}

/// Parse and evaluate every expression of `code` in `env`; returns the last value.
fn eval_source_in(code: &str, env: SEXP) -> Result<SEXP, RError> {
    let text = c_string(code)?;
    // SAFETY: R is initialised and this is its thread; allocations are protected until
    // evaluation ends; R_ParseVector does not longjmp on syntax errors (it sets status).
    unsafe {
        let source = Rf_protect(Rf_mkString(text.as_ptr()));
        let mut status = 0;
        let exprs = Rf_protect(R_ParseVector(source, -1, &mut status, R_NilValue));
        if status != PARSE_OK {
            Rf_unprotect(2);
            return Err(RError(format!("internal R source failed to parse (status {status})")));
        }
        let mut last = R_NilValue;
        for i in 0..Rf_length(exprs) {
            match try_eval(VECTOR_ELT(exprs, i as isize), env) {
                Ok(v) => last = v,
                Err(e) => {
                    Rf_unprotect(2);
                    return Err(e);
                }
            }
        }
        Rf_unprotect(2);
        Ok(last)
    }
}

/// `R_tryEval`, with R's error message on failure.
///
/// # Safety
/// R must be initialised and this must be its thread; `expr` and `env` must be protected.
unsafe fn try_eval(expr: SEXP, env: SEXP) -> Result<SEXP, RError> {
    let mut failed = 0;
    // SAFETY: guaranteed by the caller.
    let value = unsafe { R_tryEval(expr, env, &mut failed) };
    if failed == 0 {
        return Ok(value);
    }
    // geterrmessage() cannot fail.
    let text = c_string("geterrmessage()").expect("static");
    // SAFETY: as above; evaluating a constant call in base.
    let message = unsafe {
        let source = Rf_protect(Rf_mkString(text.as_ptr()));
        let mut status = 0;
        let parsed = Rf_protect(R_ParseVector(source, -1, &mut status, R_NilValue));
        let mut again = 0;
        let msg = R_tryEval(VECTOR_ELT(parsed, 0), R_BaseEnv, &mut again);
        let out = if again == 0 { strings(msg).join("") } else { "unknown R error".into() };
        Rf_unprotect(2);
        out
    };
    Err(RError(message.trim_end().to_string()))
}

/// A character vector's elements (empty for anything else).
fn strings(value: SEXP) -> Vec<String> {
    // SAFETY: reading a SEXP R just returned on its own thread; R_CHAR yields
    // NUL-terminated strings owned by R that we copy immediately.
    unsafe {
        if Rf_isString(value) == 0 {
            return Vec::new();
        }
        (0..Rf_length(value))
            .map(|i| CStr::from_ptr(R_CHAR(STRING_ELT(value, i as isize))).to_string_lossy().into_owned())
            .collect()
    }
}

/// Embedded R may leave its C stack check off ("unlimited"); then deep recursion
/// segfaults instead of raising R's "C stack usage is too close to the limit".
fn set_c_stack_limit() {
    // `None`: unlimited, and R's check stays off.
    if let Some(current) = rustix::process::getrlimit(rustix::process::Resource::Stack).current {
        // SAFETY: R is initialised; R_CStackLimit is a plain global read by R's checks.
        unsafe { R_CStackLimit = (current as f64 * 0.95) as usize };
    }
}

/// Point R's temp dir at `$TMPDIR` (the child's workspace). R caches the temp dir at
/// start-up, so setting the variable alone would leave `tempdir()` in the zygote's.
pub fn reinit_temp_dir() {
    // SAFETY: R is initialised, single thread. Clearing R_TempDir makes R_reInitTempDir
    // create a fresh directory under $TMPDIR instead of keeping the inherited one (whose
    // memory stays with the zygote's copy; nothing is freed here).
    unsafe {
        R_TempDir = std::ptr::null_mut();
        R_reInitTempDir(1);
    }
}
