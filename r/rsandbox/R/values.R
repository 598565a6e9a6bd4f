# R values as data, both ways (issue #25): `globals` go into a sandbox, and a typed
# result (`value_typed`) comes back, in the typed JSON encoding of docs/protocol.md
# ("Values"), the same one the sandbox's eval.R decodes and encodes. Nothing here is
# code: values are written as JSON text and rebuilt with structure() and as.Date(); no
# serialize()/unserialize(), no parse() or eval() of anything that came back.
#
# Supported: NULL; logical, integer, double and character vectors (names, NA; or dim and
# dimnames: matrices and arrays); factors (ordered too); Date; POSIXct; data frames of
# class "data.frame" (row names kept); lists of these. Other attributes are dropped.
# Anything else (functions, environments, external pointers, other classes, complex,
# raw) is refused going in, and comes back as the lossy `value` instead.

typed_max_depth <- 64L

# `globals` as JSON text (class "json", written verbatim into the request), after
# checking every value; a value that cannot travel is an `rsandbox_bad_input` naming it.
encode_globals <- function(globals, extra = character(), arg = "globals", call = rlang::caller_env()) {
  if (is.null(globals) && !length(extra)) return(NULL)
  if (is.null(globals)) globals <- list()
  nm <- names(globals)
  if (!is.list(globals) || is.object(globals) ||
      (length(globals) && (is.null(nm) || anyNA(nm) || any(!nzchar(nm))))) {
    bad_input(c("{.arg {arg}} must be a named list of values, not {describe(globals)}.",
                i = "For example {.code {arg} = list(x = 1, df = mtcars)}."), call = call)
  }
  if (anyDuplicated(nm)) bad_input("The names of {.arg {arg}} must be unique; {.val {nm[duplicated(nm)]}} is repeated.", call = call)
  encoded <- c(vapply(seq_along(globals), function(i) {
    typed_json(globals[[i]], paste0(arg, "$", nm[i]), call)
  }, character(1)), extra)
  nm <- c(nm, names(extra))
  structure(paste0("{", paste0(json_strings(nm), ":", encoded, collapse = ","), "}"), class = "json")
}

# One value as typed JSON text; `where` names it in errors (`globals$df$when`).
typed_json <- function(x, where, call, depth = 0L) {
  refuse <- function(why) {
    bad_input(c("{.arg {where}} cannot be passed into a sandbox: {why}.",
                i = "Values travel as data: vectors, factors, dates, data frames, matrices and lists of them."),
              call = call)
  }
  if (depth > typed_max_depth) refuse(sprintf("it is nested deeper than %d levels", typed_max_depth))
  if (is.null(x)) return("{\"type\":\"null\"}")
  field <- function(key, json) paste0(",\"", key, "\":", json)
  strings <- function(s) json_array(json_strings(s))
  nms <- if (!is.null(names(x)) && !is.data.frame(x)) field("names", strings(names(x))) else ""
  cls <- oldClass(x)
  if (is.data.frame(x)) {
    if (!identical(cls, "data.frame")) {
      refuse(sprintf("it is a data frame of class <%s> (as.data.frame() makes it a plain one)", paste(cls, collapse = "/")))
    }
    columns <- vapply(seq_along(x), function(j) {
      typed_json(x[[j]], paste0(where, "$", names(x)[j]), call, depth + 1L)
    }, character(1))
    rn <- if (.row_names_info(x, 1L) < 0L) "" else {
      r <- attr(x, "row.names")
      field("row_names", if (is.character(r)) strings(r) else json_array(json_integers(r)))
    }
    return(paste0("{\"type\":\"data.frame\"", field("names", strings(names(x))), field("columns", json_array(columns)),
                  field("nrow", .row_names_info(x, 2L)), rn, "}"))
  }
  if (is.factor(x)) {
    if (!(identical(cls, "factor") || identical(cls, c("ordered", "factor")))) refuse("it is a factor of another class")
    return(paste0("{\"type\":\"factor\"", field("levels", strings(levels(x))),
                  field("codes", json_array(json_integers(unclass(x)))), if (is.ordered(x)) field("ordered", "true"),
                  nms, "}"))
  }
  if (identical(cls, "Date")) {
    return(paste0("{\"type\":\"Date\"", field("value", strings(format(x, "%Y-%m-%d"))), nms, "}"))
  }
  if (identical(cls, c("POSIXct", "POSIXt"))) {
    tz <- attr(x, "tzone")
    return(paste0("{\"type\":\"POSIXct\"", field("value", json_array(json_doubles(unclass(x)))),
                  if (length(tz)) field("tz", json_strings(tz[1L])), nms, "}"))
  }
  if (is.function(x)) refuse("it is a function (pass code as code)")
  if (is.environment(x)) refuse("it is an environment")
  if (typeof(x) == "externalptr") refuse("it is an external pointer")
  if (is.object(x) || isS4(x)) refuse(sprintf("it is an object of class <%s>", paste(class(x), collapse = "/")))
  if (is.list(x) && !is.pairlist(x)) {
    if (!is.null(dim(x))) refuse("it is a list with dimensions")
    items <- vapply(seq_along(x), function(j) {
      typed_json(x[[j]], paste0(where, "[[", j, "]]"), call, depth + 1L)
    }, character(1))
    return(paste0("{\"type\":\"list\"", field("value", json_array(items)), nms, "}"))
  }
  type <- typeof(x)
  elements <- switch(type,
    logical = json_logicals(x), integer = json_integers(x), double = json_doubles(x),
    character = {
      x <- enc2utf8(x)
      if (!all(validUTF8(x[!is.na(x)]))) refuse("it has strings that are not valid UTF-8")
      json_strings(x)
    },
    refuse(sprintf("it is of type %s", type)))
  d <- dim(x)
  shape <- if (is.null(d)) nms else {
    dn <- dimnames(x)
    paste0(field("dim", json_array(json_integers(d))),
           if (!is.null(dn)) field("dimnames", json_array(vapply(dn, function(n) if (is.null(n)) "null" else strings(n),
                                                                  character(1), USE.NAMES = FALSE))))
  }
  paste0("{\"type\":\"", type, "\"", field("value", json_array(elements)), shape, "}")
}

json_array <- function(elements) paste0("[", paste(elements, collapse = ","), "]")

json_logicals <- function(x) {
  out <- ifelse(x, "true", "false")
  out[is.na(x)] <- "null"
  as.character(out)
}

json_integers <- function(x) {
  out <- as.character(as.integer(x))
  out[is.na(x)] <- "null"
  out
}

# The shortest of 15, 16 or 17 significant digits that reads back as the same double.
json_doubles <- function(x) {
  x <- as.double(x)
  out <- character(length(x))
  finite <- is.finite(x)
  if (any(finite)) {
    v <- x[finite]
    s <- sprintf("%.15g", v)
    for (digits in c(16L, 17L)) {
      lossy <- as.numeric(s) != v
      if (!any(lossy)) break
      s[lossy] <- sprintf("%.*g", digits, v[lossy])
    }
    out[finite] <- s
  }
  out[is.na(x)] <- "null"
  out[is.nan(x)] <- "\"NaN\""
  out[!is.na(x) & x == Inf] <- "\"Inf\""
  out[!is.na(x) & x == -Inf] <- "\"-Inf\""
  out
}

json_strings <- function(x) {
  x <- enc2utf8(as.character(x))
  if (!length(x)) return(character())
  missing <- is.na(x)
  special <- !missing & grepl("[\001-\037\"\\\\]", x, perl = TRUE)
  if (any(special)) x[special] <- json_escape(x[special])
  out <- paste0("\"", x, "\"")
  out[missing] <- "null"
  out
}

json_escape <- function(x) {
  x <- gsub("\\", "\\\\", x, fixed = TRUE)
  x <- gsub("\"", "\\\"", x, fixed = TRUE)
  x <- gsub("\n", "\\n", x, fixed = TRUE)
  x <- gsub("\r", "\\r", x, fixed = TRUE)
  x <- gsub("\t", "\\t", x, fixed = TRUE)
  ctrl <- grepl("[\001-\037]", x, perl = TRUE)
  if (any(ctrl)) {
    sub <- x[ctrl]
    hits <- gregexpr("[\001-\037]", sub, perl = TRUE)
    regmatches(sub, hits) <- lapply(regmatches(sub, hits), function(chars) {
      sprintf("\\u%04x", vapply(chars, utf8ToInt, integer(1L), USE.NAMES = FALSE))
    })
    x[ctrl] <- sub
  }
  x
}

# A typed value parsed with simplifyVector = FALSE (arrays are lists, null is NULL) as
# the R value; an error for anything that is not the encoding.
from_typed <- function(node, depth = 0L) {
  if (depth > typed_max_depth) stop("nested too deeply")
  type <- if (is.list(node)) node[["type"]]
  if (!is.character(type) || length(type) != 1L) stop("a value must have a type")
  x <- switch(type,
    null = return(NULL),
    logical = , integer = , double = , character = {
      x <- typed_atomic(node[["value"]], type)
      if (!is.null(node[["dim"]])) {
        dim(x) <- typed_atomic(node[["dim"]], "integer")
        if (!is.null(node[["dimnames"]])) {
          dimnames(x) <- lapply(node[["dimnames"]], function(d) if (is.null(d)) NULL else typed_atomic(d, "character"))
        }
      }
      x
    },
    factor = {
      levels <- typed_atomic(node[["levels"]], "character")
      codes <- typed_atomic(node[["codes"]], "integer")
      if (anyNA(levels) || anyDuplicated(levels) || any(!is.na(codes) & (codes < 1L | codes > length(levels)))) {
        stop("not a factor")
      }
      structure(codes, levels = levels, class = if (isTRUE(node[["ordered"]])) c("ordered", "factor") else "factor")
    },
    Date = {
      s <- typed_atomic(node[["value"]], "character")
      if (any(!is.na(s) & !grepl("^[0-9]{4}-[0-9]{2}-[0-9]{2}$", s))) stop("not a date")
      as.Date(s, format = "%Y-%m-%d")
    },
    POSIXct = {
      tz <- node[["tz"]]
      if (!is.null(tz) && !(is.character(tz) && length(tz) == 1L)) stop("not a time zone")
      .POSIXct(typed_atomic(node[["value"]], "double"), tz = tz)
    },
    list = {
      if (!is.list(node[["value"]])) stop("not a list")
      lapply(node[["value"]], from_typed, depth = depth + 1L)
    },
    data.frame = {
      columns <- lapply(node[["columns"]], from_typed, depth = depth + 1L)
      nms <- typed_atomic(node[["names"]], "character")
      n <- node[["nrow"]]
      if (!is.numeric(n) || length(n) != 1L || n < 0 || length(nms) != length(columns)) stop("not a data frame")
      n <- as.integer(n)
      if (any(vapply(columns, NROW, integer(1)) != n)) stop("not a data frame")
      rn <- node[["row_names"]]
      rn <- if (is.null(rn)) .set_row_names(n)
            else if (length(rn) && is.character(rn[[1]])) typed_atomic(rn, "character") else typed_atomic(rn, "integer")
      if (!is.null(node[["row_names"]]) && length(rn) != n) stop("not a data frame")
      return(structure(columns, names = nms, row.names = rn, class = "data.frame"))
    },
    stop("unknown type")
  )
  if (!is.null(node[["names"]])) names(x) <- typed_atomic(node[["names"]], "character")
  x
}

# A JSON array (a list of scalars and NULLs) as an atomic vector of `type`.
typed_atomic <- function(v, type) {
  if (!is.list(v)) stop("not an array")
  na <- switch(type, logical = NA, integer = NA_integer_, double = NA_real_, character = NA_character_)
  if (!length(v)) return(vector(type, 0L))
  scalar <- vapply(v, function(e) is.null(e) || (is.atomic(e) && length(e) == 1L), logical(1))
  if (!all(scalar)) stop("not an array of scalars")
  switch(type,
    logical = vapply(v, function(e) if (is.null(e)) NA else if (is.logical(e)) e else stop("not logical"), logical(1)),
    integer = vapply(v, function(e) {
      if (is.null(e)) NA_integer_
      else if (is.numeric(e) && e == trunc(e) && abs(e) <= .Machine$integer.max) as.integer(e)
      else stop("not an integer")
    }, integer(1)),
    double = vapply(v, function(e) {
      if (is.null(e)) NA_real_
      else if (is.numeric(e)) as.double(e)
      else if (is.character(e) && e %in% c("NaN", "Inf", "-Inf")) switch(e, "NaN" = NaN, "Inf" = Inf, "-Inf" = -Inf)
      else stop("not a double")
    }, double(1)),
    character = vapply(v, function(e) if (is.null(e)) NA_character_ else if (is.character(e)) e else stop("not a string"),
                       character(1))
  )
}

# The value of a result: the typed one when the sandbox sent it (and it decodes),
# otherwise the lossy JSON one.
result_value <- function(r) {
  typed <- r$value_typed
  if (is.list(typed) && !identical(typed$type, "unsupported")) {
    value <- tryCatch(list(from_typed(typed)), error = function(e) NULL)
    if (!is.null(value)) return(value[[1]])
  }
  json_value(r$value)
}

# A function and its arguments as code (the function deparsed: the caller's own code)
# and the globals it reads (`.rsandbox_args`).
function_call <- function(fn, args, call) {
  if (!is.list(args) || is.object(args)) bad_input("{.arg args} must be a list of arguments, not {describe(args)}.", call = call)
  text <- paste0(".rsandbox_fn <- ", paste(deparse(fn), collapse = "\n"), "\n",
                 "do.call(\".rsandbox_fn\", .rsandbox_args)")
  list(code = text, globals = c(.rsandbox_args = typed_json(args, "args", call)))
}
