# category: files
# summary: plant symlinks to secrets in the plot directory so the result carries them as PNG data
# expect: outcome=ok
# expect-stdout-contains: planted
# targets: secret:etc, secret:home, secret:victim
# calibrate: no — the plot directory exists only inside the sandbox

# The supervisor base64-encodes every *.png in the plot directory into the result.
plots <- file.path(getwd(), ".rsandbox-plots")
file.symlink("{{ETC_SECRET}}", file.path(plots, "plot-000.png"))
file.symlink("{{TOKEN_FILE_HOME}}", file.path(plots, "plot-001.png"))
file.symlink("{{VICTIM_FILE}}", file.path(plots, "plot-002.png"))
cat("planted", length(list.files(plots)), "links\n")
