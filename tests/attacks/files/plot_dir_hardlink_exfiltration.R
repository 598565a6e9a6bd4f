# category: files
# summary: hard-link secrets into the plot directory so the result carries them as PNG data
# expect: outcome=ok
# expect-stdout-contains: tried
# targets: secret:tmp, secret:home
# calibrate: no — the plot directory exists only inside the sandbox

plots <- file.path(getwd(), ".rsandbox-plots")
print(file.link("{{TMP_SECRET}}", file.path(plots, "plot-000.png")))
print(file.link("{{TOKEN_FILE_HOME}}", file.path(plots, "plot-001.png")))
cat("tried\n")
