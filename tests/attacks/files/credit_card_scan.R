# category: files
# summary: the paper's findCreditCards (B.2) on the real ~/Documents of the identity
# expect: outcome=ok
# expect-stdout-contains: scan done
# expect-stdout-not: {{CARD_1}}
# expect-stdout-not: {{CARD_2}}
# targets: secret:documents
# calibrate: yes
# calibrate-expect-stdout-contains: {{CARD_1}}
# calibrate-expect-stdout-contains: {{CARD_2}}

findCreditCards <- function(dir) {
  pattern <- "([0-9]{4}[- ]){3}[0-9]{4}"
  for (filename in list.files(dir, full.names = TRUE, recursive = TRUE)) {
    if (file.info(filename)$size > 1e6) next
    doc <- readLines(filename)
    results <- gregexpr(pattern, doc)
    output <- unlist(regmatches(doc, results))
    if (length(output) > 0) {
      cat(paste(filename, ":", output, collapse = "\n"), "\n")
    }
  }
  cat("scan done\n")
}
findCreditCards("{{DOCUMENTS}}")
