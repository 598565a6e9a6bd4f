//! JSON values from the host (tool results) turned into R values, the inverse of
//! `rsandbox_to_json`: numbers -> double vectors, strings -> character, booleans ->
//! logical, null inside an array -> NA, arrays of same-keyed objects -> data frames,
//! other arrays -> lists, objects -> named lists, null -> NULL.

use crate::r_api::*;
use serde_json::Value;

/// Build the R value for `value`. The result is unprotected: protect it before the
/// next allocation.
///
/// # Safety
/// R must be initialised and this must be its thread.
pub unsafe fn to_r(value: &Value) -> SEXP {
    // SAFETY: the caller's guarantee.
    unsafe { convert(value, true) }
}

/// [`to_r`] without guessing data frames: an array of objects is always a list. For the
/// typed encoding of `globals` (`eval.R` decodes the result), where a data frame's
/// columns are an array of same-keyed objects that must stay a list.
///
/// # Safety
/// R must be initialised and this must be its thread.
pub unsafe fn to_r_plain(value: &Value) -> SEXP {
    // SAFETY: the caller's guarantee.
    unsafe { convert(value, false) }
}

unsafe fn convert(value: &Value, records: bool) -> SEXP {
    // SAFETY: R API calls on R's thread (the caller's guarantee); every allocated SEXP
    // is protected while others are allocated and unprotected once before returning.
    unsafe {
        match value {
            Value::Null => R_NilValue,
            Value::Bool(b) => Rf_ScalarLogical(*b as i32),
            Value::Number(n) => Rf_ScalarReal(n.as_f64().unwrap_or(R_NaReal)),
            Value::String(s) => Rf_ScalarString(mk_char(s)),
            Value::Array(items) => array_to_r(items, records),
            Value::Object(map) => {
                let keys: Vec<&String> = map.keys().collect();
                let values: Vec<&Value> = map.values().collect();
                named_list(&keys, &values, records)
            }
        }
    }
}

unsafe fn mk_char(s: &str) -> SEXP {
    // A JSON string may hold \u0000, which an R string cannot: cut there rather than
    // let R raise an error outside R_tryEval.
    let s = s.split('\0').next().unwrap_or_default();
    // SAFETY: R copies `len` bytes of valid UTF-8 into a new CHARSXP.
    unsafe { Rf_mkCharLenCE(s.as_ptr().cast(), s.len() as i32, CE_UTF8) }
}

unsafe fn array_to_r(items: &[Value], records: bool) -> SEXP {
    let n = items.len() as isize;
    let non_null: Vec<&Value> = items.iter().filter(|v| !v.is_null()).collect();
    // SAFETY: see to_r.
    unsafe {
        // Only nulls: R's NA (logical), as `[NA]` encodes; a list of NULLs would not
        // compare equal to what the tool returned.
        if !items.is_empty() && non_null.is_empty() {
            let out = Rf_allocVector(LGLSXP, n);
            std::slice::from_raw_parts_mut(LOGICAL(out), items.len()).fill(R_NaInt);
            return out;
        }
        if !non_null.is_empty() && non_null.iter().all(|v| v.is_number()) {
            let out = Rf_allocVector(REALSXP, n);
            let data = std::slice::from_raw_parts_mut(REAL(out), items.len());
            for (slot, v) in data.iter_mut().zip(items) {
                *slot = v.as_f64().unwrap_or(R_NaReal);
            }
            return out;
        }
        if !non_null.is_empty() && non_null.iter().all(|v| v.is_boolean()) {
            let out = Rf_allocVector(LGLSXP, n);
            let data = std::slice::from_raw_parts_mut(LOGICAL(out), items.len());
            for (slot, v) in data.iter_mut().zip(items) {
                *slot = v.as_bool().map_or(R_NaInt, |b| b as i32);
            }
            return out;
        }
        if !non_null.is_empty() && non_null.iter().all(|v| v.is_string()) {
            let out = Rf_protect(Rf_allocVector(STRSXP, n));
            for (i, v) in items.iter().enumerate() {
                let chr = v.as_str().map_or(R_NaString, |s| mk_char(s));
                SET_STRING_ELT(out, i as isize, chr);
            }
            Rf_unprotect(1);
            return out;
        }
        if let Some(columns) = record_columns(items).filter(|_| records) {
            return data_frame(&columns, items);
        }
        let out = Rf_protect(Rf_allocVector(VECSXP, n));
        for (i, v) in items.iter().enumerate() {
            SET_VECTOR_ELT(out, i as isize, convert(v, records));
        }
        Rf_unprotect(1);
        out
    }
}

/// The keys shared by every element, when the array is a non-empty list of objects
/// with identical keys (the records layout `rsandbox_to_json` gives data frames).
fn record_columns(items: &[Value]) -> Option<Vec<String>> {
    let first: Vec<String> = items.first()?.as_object()?.keys().cloned().collect();
    let same = items.iter().all(|v| v.as_object().is_some_and(|o| o.keys().eq(first.iter())));
    (same && !first.is_empty()).then_some(first)
}

unsafe fn data_frame(columns: &[String], rows: &[Value]) -> SEXP {
    let column_values: Vec<Value> =
        columns.iter().map(|c| Value::Array(rows.iter().map(|r| r[c].clone()).collect())).collect();
    let keys: Vec<&String> = columns.iter().collect();
    let refs: Vec<&Value> = column_values.iter().collect();
    // SAFETY: see to_r.
    unsafe {
        let df = Rf_protect(named_list(&keys, &refs, true));
        let class = Rf_protect(Rf_ScalarString(mk_char("data.frame")));
        Rf_setAttrib(df, R_ClassSymbol, class);
        // Compact row names: c(NA_integer_, -n).
        let row_names = Rf_protect(Rf_allocVector(INTSXP, 2));
        *INTEGER(row_names) = R_NaInt;
        *INTEGER(row_names).add(1) = -(rows.len() as i32);
        Rf_setAttrib(df, R_RowNamesSymbol, row_names);
        Rf_unprotect(3);
        df
    }
}

unsafe fn named_list(keys: &[&String], values: &[&Value], records: bool) -> SEXP {
    // SAFETY: see to_r.
    unsafe {
        let out = Rf_protect(Rf_allocVector(VECSXP, values.len() as isize));
        let names = Rf_protect(Rf_allocVector(STRSXP, keys.len() as isize));
        for (i, (k, v)) in keys.iter().zip(values).enumerate() {
            SET_STRING_ELT(names, i as isize, mk_char(k));
            SET_VECTOR_ELT(out, i as isize, convert(v, records));
        }
        Rf_setAttrib(out, R_NamesSymbol, names);
        Rf_unprotect(2);
        out
    }
}
