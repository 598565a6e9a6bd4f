//! The values an `Eval` request carries besides code, for `eval.R` to read:
//! `.Call("rsandbox_request_values")` returns `list(globals = <the typed encoding of each
//! global, as plain R lists and vectors, or NULL>, typed = <logical>)` and forgets the
//! globals. `eval.R` decodes them into R values (as data: no parse, no eval).

use crate::r_api::*;
use crate::r_values::to_r_plain;
use serde_json::{Map, Value};
use std::sync::Mutex;

struct Pending {
    globals: Option<Map<String, Value>>,
    typed: bool,
}

static PENDING: Mutex<Pending> = Mutex::new(Pending { globals: None, typed: false });

/// What the next evaluation reads (set before each `Eval`).
pub fn set(globals: Map<String, Value>, typed: bool) {
    let mut pending = PENDING.lock().unwrap_or_else(|e| e.into_inner());
    pending.globals = Some(globals).filter(|g| !g.is_empty());
    pending.typed = typed;
}

/// `.Call("rsandbox_request_values")`, see the module's documentation.
pub extern "C" fn rsandbox_request_values() -> SEXP {
    let (globals, typed) = {
        let mut pending = PENDING.lock().unwrap_or_else(|e| e.into_inner());
        (pending.globals.take(), pending.typed)
    };
    // SAFETY: R's thread (we were called from .Call); the list is protected while its
    // elements are allocated, and each element is stored as soon as it is made.
    unsafe {
        let out = Rf_protect(Rf_allocVector(VECSXP, 2));
        let names = Rf_protect(Rf_allocVector(STRSXP, 2));
        for (i, n) in ["globals", "typed"].iter().enumerate() {
            SET_STRING_ELT(names, i as isize, Rf_mkCharLenCE(n.as_ptr().cast(), n.len() as i32, CE_UTF8));
        }
        Rf_setAttrib(out, R_NamesSymbol, names);
        if let Some(globals) = globals {
            SET_VECTOR_ELT(out, 0, to_r_plain(&Value::Object(globals)));
        }
        SET_VECTOR_ELT(out, 1, Rf_ScalarLogical(typed as i32));
        Rf_unprotect(2);
        out
    }
}
