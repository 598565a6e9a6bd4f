# category: files
# summary: stat() host files: existence, size, mode and mtime of secrets (Landlock does not cover stat)
# container-loses: without a private root (no mount namespace) host paths are visible to stat (existence, size, mode, mtime); Landlock keeps their content unreadable
# expect: outcome=ok
# expect-stdout-contains: visible: 0 of 4
# targets: secret:home, secret:etc, secret:tmp, secret:shm
# calibrate: yes
# calibrate-expect-stdout-contains: visible: 4 of 4

# No content, only metadata: does the secret exist, how big is it, when was it written?
f <- c("{{TOKEN_FILE_HOME}}", "{{ETC_SECRET}}", "{{TMP_SECRET}}", "{{SHM_SECRET}}")
info <- file.info(f)
cat("visible:", sum(!is.na(info$size)), "of", length(f), "\n")
print(info[, c("size", "mode", "mtime")])
