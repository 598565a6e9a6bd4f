//! The slice of R's C API the zygote uses (from Rinternals.h, Rembedded.h, Rinterface.h).
#![allow(non_upper_case_globals, non_camel_case_types, missing_docs, clippy::upper_case_acronyms)]

use std::ffi::{c_char, c_int, c_void};

pub type SEXP = *mut c_void;

// ParseStatus from R_ext/Parse.h.
pub const PARSE_OK: c_int = 1;

extern "C" {
    pub static mut R_BaseEnv: SEXP;
    pub static mut R_NilValue: SEXP;
    pub static mut R_TempDir: *mut c_char;
    pub static mut R_CStackLimit: usize;
    pub static mut R_SignalHandlers: c_int;
    pub static mut R_Interactive: c_int;
    /// Set (from a signal handler) to make R raise an interrupt at its next check.
    pub static mut R_interrupts_pending: c_int;
    pub static mut ptr_R_CleanUp: Option<unsafe extern "C" fn(c_int, c_int, c_int)>;

    pub fn Rf_initEmbeddedR(argc: c_int, argv: *mut *mut c_char) -> c_int;
    pub fn R_reInitTempDir(die_on_fail: c_int);
    pub fn Rf_protect(s: SEXP) -> SEXP;
    pub fn Rf_unprotect(n: c_int);
    pub fn R_PreserveObject(s: SEXP);
    pub fn Rf_mkString(s: *const c_char) -> SEXP;
    pub fn Rf_mkCharLenCE(s: *const c_char, len: c_int, enc: c_int) -> SEXP;
    pub fn Rf_ScalarString(s: SEXP) -> SEXP;
    pub fn Rf_install(s: *const c_char) -> SEXP;
    pub fn Rf_lang3(f: SEXP, a: SEXP, b: SEXP) -> SEXP;
    pub fn Rf_lang1(f: SEXP) -> SEXP;
    pub fn Rf_lang2(f: SEXP, a: SEXP) -> SEXP;
    pub fn R_set_command_line_arguments(argc: c_int, argv: *mut *mut c_char);
    pub fn Rf_lang4(f: SEXP, a: SEXP, b: SEXP, c: SEXP) -> SEXP;
    pub fn Rf_lang5(f: SEXP, a: SEXP, b: SEXP, c: SEXP, d: SEXP) -> SEXP;
    pub fn R_ParseVector(text: SEXP, n: c_int, status: *mut c_int, srcfile: SEXP) -> SEXP;
    pub fn R_tryEval(e: SEXP, env: SEXP, error: *mut c_int) -> SEXP;
    pub fn Rf_length(s: SEXP) -> c_int;
    pub fn VECTOR_ELT(s: SEXP, i: isize) -> SEXP;
    pub fn STRING_ELT(s: SEXP, i: isize) -> SEXP;
    pub fn R_CHAR(s: SEXP) -> *const c_char;
    pub fn Rf_isString(s: SEXP) -> c_int;
}

/// CE_UTF8 from Rinternals.h.
pub const CE_UTF8: c_int = 1;

// Vectors, attributes and native-routine registration (values coming back from tools).
pub const LGLSXP: u32 = 10;
pub const INTSXP: u32 = 13;
pub const REALSXP: u32 = 14;
pub const STRSXP: u32 = 16;
pub const VECSXP: u32 = 19;

#[repr(C)]
pub struct R_CallMethodDef {
    pub name: *const c_char,
    pub fun: *const c_void,
    pub num_args: c_int,
}

extern "C" {
    pub static mut R_NamesSymbol: SEXP;
    pub static mut R_ClassSymbol: SEXP;
    pub static mut R_RowNamesSymbol: SEXP;
    pub static mut R_NaString: SEXP;
    pub static R_NaReal: f64;
    pub static R_NaInt: c_int;
    pub fn Rf_allocVector(kind: u32, len: isize) -> SEXP;
    pub fn SET_VECTOR_ELT(x: SEXP, i: isize, v: SEXP) -> SEXP;
    pub fn SET_STRING_ELT(x: SEXP, i: isize, v: SEXP);
    pub fn REAL(x: SEXP) -> *mut f64;
    pub fn LOGICAL(x: SEXP) -> *mut c_int;
    pub fn INTEGER(x: SEXP) -> *mut c_int;
    pub fn Rf_setAttrib(x: SEXP, name: SEXP, value: SEXP) -> SEXP;
    pub fn Rf_ScalarReal(x: f64) -> SEXP;
    pub fn Rf_ScalarLogical(x: c_int) -> SEXP;
    pub fn R_getEmbeddingDllInfo() -> *mut c_void;
    pub fn R_registerRoutines(
        info: *mut c_void,
        c: *const c_void,
        call: *const R_CallMethodDef,
        fortran: *const c_void,
        external: *const c_void,
    ) -> c_int;
}
