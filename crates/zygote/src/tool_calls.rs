//! The native side of tool stubs: `.Call("rsandbox_tool_call", name, json)` sends a
//! `ToolCall` frame on the child's channel and blocks for the matching `ToolReply`.
//! It returns `list(value = <R value>, error = <string or NULL>)`; the R stub turns an
//! error into an R condition.

use crate::r_api::*;
use crate::r_values::to_r;
use crate::sandbox_child::host;
use std::ffi::{c_char, CStr};
use std::sync::atomic::{AtomicU64, Ordering};
use wire::messages::ChildReport;

static NEXT_CALL: AtomicU64 = AtomicU64::new(1);

/// Register `rsandbox_tool_call` and `rsandbox_emit` with R as routines of the
/// embedding executable.
pub fn register_native_routines() {
    static TOOL_CALL: &[u8] = b"rsandbox_tool_call\0";
    static EMIT: &[u8] = b"rsandbox_emit\0";
    static REQUEST_VALUES: &[u8] = b"rsandbox_request_values\0";
    let routines = [
        R_CallMethodDef { name: TOOL_CALL.as_ptr().cast(), fun: rsandbox_tool_call as *const _, num_args: 2 },
        R_CallMethodDef { name: EMIT.as_ptr().cast(), fun: rsandbox_emit as *const _, num_args: 2 },
        R_CallMethodDef {
            name: REQUEST_VALUES.as_ptr().cast(),
            fun: crate::request_values::rsandbox_request_values as *const _,
            num_args: 0,
        },
        R_CallMethodDef { name: std::ptr::null(), fun: std::ptr::null(), num_args: 0 },
    ];
    // SAFETY: R is initialised; R copies the table (names are 'static); each routine has
    // the declared signature (that many SEXP arguments, SEXP result).
    unsafe {
        R_registerRoutines(
            R_getEmbeddingDllInfo(),
            std::ptr::null(),
            routines.as_ptr(),
            std::ptr::null(),
            std::ptr::null(),
        );
    }
}

/// Ask the host. Never panics across the C boundary: failures become the error string.
extern "C" fn rsandbox_tool_call(name: SEXP, args_json: SEXP) -> SEXP {
    let outcome = std::panic::catch_unwind(|| {
        // SAFETY: called by R with two arguments from the stub, both character(1).
        let (tool, args) = unsafe { (first_string(name), first_string(args_json)) };
        call_host(tool?, args?)
    })
    .unwrap_or_else(|_| Err("internal error in the tool bridge".into()));
    // SAFETY: R's thread (we were called from .Call); allocations are protected until
    // the list is complete.
    unsafe {
        let out = Rf_protect(Rf_allocVector(VECSXP, 2));
        let names = Rf_protect(Rf_allocVector(STRSXP, 2));
        for (i, n) in ["value", "error"].iter().enumerate() {
            SET_STRING_ELT(names, i as isize, Rf_mkCharLenCE(n.as_ptr().cast(), n.len() as i32, CE_UTF8));
        }
        Rf_setAttrib(out, R_NamesSymbol, names);
        match outcome {
            Ok(value) => {
                SET_VECTOR_ELT(out, 0, to_r(&value));
            }
            Err(message) => {
                let m = message.replace('\0', " ");
                let chr = Rf_mkCharLenCE(m.as_ptr().cast(), m.len() as i32, CE_UTF8);
                SET_VECTOR_ELT(out, 1, Rf_ScalarString(chr));
            }
        }
        Rf_unprotect(2);
        out
    }
}

/// `.Call("rsandbox_emit", stream, text)`: a message or warning streamed to the host as
/// it happens. Does not wait; a host that is gone ends the child at the next report.
extern "C" fn rsandbox_emit(stream: SEXP, text: SEXP) -> SEXP {
    let sent = std::panic::catch_unwind(|| {
        // SAFETY: called by R with two arguments from eval.R, both character(1).
        let (stream, text) = unsafe { (first_string(stream), first_string(text)) };
        if let (Ok(stream), Ok(text)) = (stream, text) {
            crate::sandbox_child::write_report(&ChildReport::Output { stream, text });
        }
    });
    drop(sent);
    // SAFETY: R is initialised; R_NilValue is a constant.
    unsafe { R_NilValue }
}

/// # Safety
/// `s` must be a SEXP R passed to us.
unsafe fn first_string(s: SEXP) -> Result<String, String> {
    // SAFETY: type-checked before indexing; R_CHAR gives a NUL-terminated string.
    unsafe {
        if Rf_isString(s) == 0 || Rf_length(s) < 1 {
            return Err("tool bridge expects character arguments".into());
        }
        Ok(CStr::from_ptr(R_CHAR(STRING_ELT(s, 0)) as *const c_char).to_string_lossy().into_owned())
    }
}

fn call_host(tool: String, args_json: String) -> Result<serde_json::Value, String> {
    let args: serde_json::Value =
        serde_json::from_str(&args_json).map_err(|e| format!("arguments are not JSON: {e}"))?;
    let call = NEXT_CALL.fetch_add(1, Ordering::SeqCst);
    host().call_tool(call, tool, args).unwrap_or_else(|e| Err(format!("the host channel failed: {e}")))
}
