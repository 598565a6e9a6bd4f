# category: files
# summary: walk /root, /home, /tmp, /etc and /dev/shm and print every line mentioning SECRET
# expect: outcome=ok
# expect-stdout-contains: found 0
# targets: secret:home, secret:ssh, secret:tmp, secret:etc, secret:shm
# calibrate: yes
# calibrate-expect-stdout-contains: RSANDBOX-SECRET

found <- 0
homes <- c("/root", list.files("/home", full.names = TRUE))
places <- c(homes, file.path(homes, ".ssh"), file.path(homes, "Documents"), "/tmp", "/etc", "/dev/shm")
files <- list.files(places, all.files = TRUE, full.names = TRUE, no.. = TRUE)
for (f in files) {
  if (isTRUE(file.info(f)$size > 1e6) || isTRUE(file.info(f)$isdir)) next
  txt <- tryCatch(readLines(f, warn = FALSE), error = function(e) character(), warning = function(w) character())
  hits <- grep("SECRET", txt, value = TRUE)
  if (length(hits)) { found <- found + 1; cat(f, ":", hits, "\n") }
}
cat("scanned", length(files), "files, found", found, "\n")
