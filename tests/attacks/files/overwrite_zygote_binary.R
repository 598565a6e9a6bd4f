# category: files
# summary: overwrite the zygote binary that every later sandbox starts from
# expect: outcome=error
# expect-error-contains: cannot open
# targets: file:zygote
# calibrate: no — there is no zygote outside the sandbox

exe <- Sys.readlink("/proc/self/exe")
cat("our executable:", exe, "\n")
writeBin(as.raw(c(0x7f, 0x45, 0x4c, 0x46)), "{{ZYGOTE_PATH}}")
